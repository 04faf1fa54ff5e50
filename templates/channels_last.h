// The tile of a channels-last convolution's transposes (templates/conv_epilogue.cuh), shared by
// those kernels and their launch geometry (cudnn_conv.h's channels_last_launch). Constants only:
// NVRTC compiles it too.
#pragma once

namespace fusetune {

// A tile of 32 channels x 32 positions per block of 128 threads.
constexpr int kTile = 32, kTileThreads = 128;

}  // namespace fusetune
