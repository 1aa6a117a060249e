// Package profile says where the time of a training step goes: per-stage
// timers for the forward, backward and optimizer-update passes, transfer and
// launch counters, and reports as text (the seed's format), JSON (for the web
// page) and Chrome trace events (for Perfetto). It ports ggmlR's
// ag_fwd_profile.R, its backward twin, and ag_xfer.R.
//
// # Cost when off
//
// Every profiler is off until switched on (Forward, Backward, Switch). The
// check is Enabled(p), an atomic load that inlines, so an ordinary run pays
// one branch per op; callers test it before reading any clock. Launch
// counting is always on: one map update per program run.
//
// # Stages
//
// The seed's stages, mapped onto ag's execution:
//
//	ctx       getting a graph builder / context with room
//	create    building the op's node (per op, via Op)
//	flush     allocating backend buffers
//	upload    sending host data (inputs) to the device
//	graph     building or compiling the program
//	compute   the arithmetic (device time when Run.DeviceTimed)
//	download  reading results back
//
// # Attribution
//
// Ops recorded lazily contribute only create (like the seed's deferred ops,
// which record up to create); the rest arrives when core runs a program at
// a sync point and calls RecordRun. One run may hold nodes of several passes
// (a fused forward+backward+update step), so its stages are split among the
// passes of its nodes:
//
//   - Compute: by the nodes' own durations when any is known (each node gets
//     Compute * Dur / sum of Dur; a zero Compute means the node sum), else
//     evenly per node. A pass gets the sum of its nodes' shares.
//   - Upload: all to the forward (inputs feed the forward).
//   - Download: all to Run.DownloadPass (the pass of the value read back).
//   - Ctx, Graph, Flush: by node-count share.
//
// Upload and Download fall back to the node-count share when the run has no
// node of their pass; a run without nodes gives Upload to the forward and
// everything else to DownloadPass. Only passes whose profiler is on keep
// their share. A Report's op count is the number of Op calls; its total is
// the sum of its stages.
//
// Per-op totals, keyed by op name: create time from Op plus the op's nodes'
// compute shares. The other stages belong to no op; the per-op table shows
// them as one "(other stages)" row so the rows add up to the pass total.
//
// # Transfer share and ceiling
//
// Each report prints upload+download as a share of the pass and the ceiling
// total / (total - transfer): the most a fully resident pass could gain.
//
// # Concurrency
//
// Recording may come from several goroutines (one per device); a mutex
// guards the data, and the switches are atomics read without it.
package profile
