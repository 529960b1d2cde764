// The lab convolution that lab/wgmma/bench and lab/wgmma/emu check and time, and its launch
// shape (included after conv_wgmma.cu): conv_wgmma's one-warpgroup blocks, or with -DWG_WS=1
// the warp-specialised blocks of conv_ws.cu. Kern<D> names the block type (its SMEM_BYTES),
// kThreads and kRows the threads and tile rows of a block, KERNEL(D) the kernel of dilation D.
#pragma once
#ifndef WG_WS
#define WG_WS 0
#endif
#if WG_WS
#include "conv_ws.cu"
template <int D> using Kern = ws::Block<D>;
constexpr int kThreads = ws::THREADS, kRows = 2 * wg::R;
#define KERNEL(D) ((D) == 1 ? conv_ws_d1 : conv_ws_d2)
#else
template <int D> using Kern = wg::Conv<D, wg::LBO, wg::SBO>;
constexpr int kThreads = wg::THREADS, kRows = wg::R;
#define KERNEL(D) ((D) == 1 ? conv_wgmma_d1 : conv_wgmma_d2)
#endif
