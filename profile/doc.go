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
//	graph     building or compiling the program; waiting for the device
//	          outside compute (a read's round trip, Run.Wait)
//	compute   the arithmetic (device time when Run.DeviceTimed)
//	download  reading results back: the bytes moving
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
//   - Wait, the part of Download that waited for the device (a round trip
//     that a 4-byte read pays as a large one does): to the graph stage of
//     the pass that gets Download. It is not transfer: a resident pass
//     would still wait, so the ceiling leaves it out.
//
// Upload and Download fall back to the node-count share when the run has no
// node of their pass; a run without nodes gives Upload to the forward and
// everything else to DownloadPass. Only passes whose profiler is on keep
// their share. A Report's operations are the nodes recorded (Op and Node),
// its calls the calls (Op: a composite of several nodes is one); its total
// is the sum of its stages.
//
// Per-op totals, keyed by op name: create time from Op plus the op's nodes'
// compute shares, with the op's calls and the nodes it ran. The other
// stages belong to no op; the per-op table shows them as one "(other
// stages)" row, naming each stage's time, so the rows add up to the pass
// total and a row that is most of a pass says what it is.
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
