# Whether a channels-last convolution's memory-bound transposes can hide behind the convolution:
# the batch cut into chunks, each chunk's x transpose -> cuDNN -> epilogue and transpose back
# issued on one of two streams, so that one chunk's copies run beside another's convolution.
# PyTorch's own kernels stand in for ours (x.contiguous(channels_last), F.conv* with
# cudnn.benchmark, the epilogue as an elementwise op plus a copy into the NCHW output), so only
# the ratio of the pipelined time to the serial one means anything. Shapes: the shared
# conv2d_relu_bias, depthwise_conv2d and conv_transpose2d_tanh. Median of 20, L2 flushed before
# each run (a 256 MB fill), fp32 data, TF32 convolutions (PyTorch's default).
#   python3 tests/gpu/bench/conv_overlap_probe.py
import torch
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.allow_tf32 = True
dev = torch.device("cuda")
flush = torch.empty(64 << 20, dtype=torch.float32, device=dev)
cl = torch.channels_last


def conv2d_relu_bias():
    x = torch.rand(32, 32, 256, 256, device=dev)
    w = torch.randn(64, 32, 3, 3, device=dev).contiguous(memory_format=cl)
    b, b2 = torch.randn(64, device=dev), torch.randn(64, 1, 1, device=dev)
    return x, 64, lambda xc: F.conv2d(xc, w, b, padding=1), lambda y: torch.relu(y) + b2


def depthwise_conv2d():
    x = torch.rand(32, 96, 256, 256, device=dev)
    w = torch.randn(96, 1, 5, 5, device=dev).contiguous(memory_format=cl)
    return x, 96, lambda xc: F.conv2d(xc, w, None, padding=2, groups=96), lambda y: y


def conv_transpose2d_tanh():
    x = torch.rand(32, 64, 128, 128, device=dev)
    w = torch.randn(64, 32, 3, 3, device=dev).contiguous(memory_format=cl)
    b = torch.randn(32, device=dev)
    conv = lambda xc: F.conv_transpose2d(xc, w, b, stride=2, padding=1, output_padding=1)
    return x, 32, conv, lambda y: torch.tanh(y - 0.25)


def median_ms(fn, runs=20):
    times = []
    for i in range(runs + 3):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


streams = [torch.cuda.Stream() for _ in range(2)]
with torch.no_grad():
    for make in (conv2d_relu_bias, depthwise_conv2d, conv_transpose2d_tanh):
        x, cout, conv, epilogue = make()
        n = x.shape[0]
        y_shape = conv(x[:1].contiguous(memory_format=cl)).shape
        out = torch.empty((n,) + tuple(y_shape[1:]), device=dev)
        ref = epilogue(conv(x))

        def one(lo, hi):
            y = conv(x[lo:hi].contiguous(memory_format=cl))
            out[lo:hi].copy_(epilogue(y))

        def pipelined(chunks, nstreams):
            step = n // chunks
            main = torch.cuda.current_stream()
            for s in streams[:nstreams]:
                s.wait_stream(main)
            for i in range(chunks):
                with torch.cuda.stream(streams[i % nstreams]):
                    one(i * step, (i + 1) * step)
            for s in streams[:nstreams]:
                main.wait_stream(s)

        xc = x.contiguous(memory_format=cl)
        y = conv(xc)
        print("%s: x %s, y %s" % (make.__name__, list(x.shape), list(y.shape)))
        print("  parts: x to NHWC %.4f ms, convolution %.4f ms, epilogue + NCHW %.4f ms" % (
            median_ms(lambda: x.contiguous(memory_format=cl)), median_ms(lambda: conv(xc)),
            median_ms(lambda: out.copy_(epilogue(y)))))
        for chunks, nstreams in ((1, 1), (2, 1), (2, 2), (4, 2), (8, 2), (16, 2)):
            for _ in range(2):  # cudnn.benchmark picks the chunk shape's engine outside the timing
                pipelined(chunks, nstreams)
            t = median_ms(lambda: pipelined(chunks, nstreams))
            err = (out - ref).abs().max().item()
            print("  %2d chunks on %d stream(s): %.4f ms  (max |err| %.2e)" % (chunks, nstreams, t, err))
