"""scripts/torch_timing.py - the CUDA-event timing of the side-by-side scripts kept beside the
handouts of lessons 21 and 24, which time PyTorch on the same GPU as a lesson. The lessons
themselves never need PyTorch or this file."""


def median_ms(fn, reps, warmup=1):
    """The median over `reps` timed calls of fn() in milliseconds, each call between its own pair
    of CUDA events, after `warmup` untimed calls."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]
