// Package buffer will hold device buffers: rows x capacity tables that live
// on the device, are written in place and read by index inside graphs (the
// port of ggmlR's ag_buffer; see DESIGN.md). Not built yet: its issue comes
// after core.
package buffer
