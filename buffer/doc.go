// Package buffer holds device buffers: large tables that live on a
// device, are written in place by record ranges and read by index inside
// ag's lazy graphs (the port of ggmlR's ag_buffer).
//
// Why. A replay buffer (off-policy RL) holds up to millions of transitions
// and every update reads a random batch of them. As an ordinary tensor it
// would be uploaded whole at every write; kept on the host, every batch would
// be uploaded. A Buffer keeps the table resident: Write sends only the new
// records, and GetRows sends only the indices.
//
// Layout. ggmlR's rows x capacity column-major matrix is, in Go's row-major
// terms, capacity records of width floats each (a core tensor of shape
// [capacity, width]): the same bytes, and the device's get_rows selects
// exactly these records. Offsets and indices are 0-based.
//
// Storage. The seed's ag_buffer stores f32 only (its dtype = "f16" is
// refused). NewWithStorage also stores records as f16 or bf16
// (core.HalfTable): half the memory, so twice the transitions fit, with
// the values rounded once when written; GetRows still gives f32, converted
// on the device, and only the indices cross the bus.
//
// Lifetime. The table is a persistent core value (core.Device.Zeros), outside
// the memory a run plans, so it survives any number of steps. Device.Close
// moves it to the host in 16 MB parts (and fails, freeing nothing, if that
// download fails); its next use on the device uploads it again. Free releases
// it at once; a Buffer that is garbage collected releases its memory too, but
// never while a pending graph node still reads it (the node holds the table).
//
// A Buffer is safe for concurrent use, like the Device it belongs to.
package buffer
