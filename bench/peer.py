"""What the PyTorch peers of `ag bench` share (torch_mlp.py, torch_gpt.py,
torch_convnet.py): the device with TF32 off, timing as ag bench times
(median and minimum of reps after warm-up, synchronized), and a step
captured as a CUDA graph. Imported from the scripts' own folder."""
import statistics, time

import torch


def device(name):
    """The torch device and its synchronization; on CUDA, f32 means f32."""
    dev = torch.device(name)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return dev, torch.cuda.synchronize
    return dev, lambda: None


WARM_S = 1.0  # ag bench's -warmup default: a GPU idle for a second clocks down


def timed(fn, reps, sync, warm=3, warm_s=WARM_S):
    """Median and minimum milliseconds of reps calls of fn after warm-up:
    warm calls (compiling, capturing), then calls for warm_s seconds more
    (as ag bench's -warmup), so that timing starts at the GPU's working
    clock."""
    for _ in range(warm):
        fn()
    sync()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm_s:
        fn()
        sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


def cuda_graph(step, body, prepare):
    """A replay function of body (forward, backward, update; returns the
    loss tensor) captured as a CUDA graph after three warm-up steps on a
    side stream; prepare runs just before the capture (zero_grad)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    prepare()
    with torch.cuda.graph(g):
        loss = body()

    def replay():
        g.replay()
        return loss.item()

    replay.unread = g.replay  # a step whose loss nobody reads
    return replay


def every(n, unread, read):
    """One timing unit of n steps, the loss read at the last only (ag bench
    -every n): timed's milliseconds divided by n are a step's share."""
    def group():
        for _ in range(n - 1):
            unread()
        return read()
    return group
