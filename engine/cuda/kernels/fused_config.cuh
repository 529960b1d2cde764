// The fused kernel's compile-time sizes, tunables, weight layout and shared memory (part of
// fused.cu, which includes it first, after common.cuh):
//
//   block tile = VF_TX (16) voxels in x  x  VF_ROWS rows in y, VF_THREADS = 32 * 2 * VF_ROWS/2
//   weights    = float32 [VF_WEIGHTS] in the VF_OFF_* layout (module_cuda.go's PackFused)
//   VfSmem     = x copies, e planes, s, the convs' fp16 weights, biases and fragments;
//                fused_geometry = {VF_ROWS, VF_THREADS, sizeof(VfSmem)} for the launcher
#pragma once

#define VF_TX 16 // output voxels per tile row: the mma's M
// Tile rows (y): VF_ROWS/2 warps per conv of two rows each. 16 rows need ~125 KiB of
// shared memory per block, which sm_90 has (227 KiB) and sm_86/89 have not (99 KiB): they, sm_80
// and the compute_80 PTX get 12 rows (~92 KiB; slower, docs/perf.md). The host
// reads the geometry of the code it loaded from fused_geometry.
#define VF_ROWS_SM90 16
#define VF_ROWS_SM80 12
#ifndef VF_ROWS
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define VF_ROWS VF_ROWS_SM80
#else
#define VF_ROWS VF_ROWS_SM90
#endif
#endif
// Fewer than 4 rows gave wrong labels in an earlier kernel (docs/perf.md) and are untested in
// this one: refused.
static_assert(VF_ROWS >= 4, "fused kernel: VF_ROWS below 4 gives wrong labels (docs/perf.md)");
static_assert(VF_ROWS % 2 == 0, "fused kernel: each conv warp computes two tile rows");
// VF_MINB: the kernels' __launch_bounds__ minimum of blocks per SM (1: registers up to
// 65536 / VF_THREADS a thread).
#ifndef VF_MINB
#define VF_MINB 1
#endif
#define VF_RPW 2                 // tile rows per conv warp (M = 32)
#define VF_CW (VF_ROWS / VF_RPW) // warps per conv; the conv2 warps also make conv1
#define VF_WARPS (2 * VF_CW)
#define VF_THREADS (32 * VF_WARPS)
#define VF_EW 24            // e plane width in voxels: tile x -2 .. +21 (three ldmatrix segments of 8)
#define VF_EH (VF_ROWS + 4) // e plane rows: tile y -2 .. VF_ROWS+1
#define VF_XW 24            // x copy width (fp16)
#define VF_XH (VF_ROWS + 6) // x rows: tile y -3 .. VF_ROWS+2
#define VF_XRAW 26          // x columns loaded: tile x -3 .. +22
#define VF_NSEG (3 * VF_EH) // conv1 segments of 8 e voxels per plane
#define VF_NGROUP ((VF_NSEG + 1) / 2)

// Weight buffer layout (float32 offsets). Convs [tap][co][ci], tap = (dz*3+dy)*3+dx.
#define VF_OFF_W1 0       // [27][16]: tap, co
#define VF_OFF_B1 432     // [16]
#define VF_OFF_W2 448     // [27][16][16]
#define VF_OFF_B2 7360    // [16]
#define VF_OFF_WG 7376    // [27][16][16]
#define VF_OFF_BG 14288   // [16]
#define VF_OFF_GX 14304   // [8][16]: gate wx
#define VF_OFF_GXB 14432  // [8]
#define VF_OFF_GG 14440   // [8][16]: gate wg
#define VF_OFF_GGB 14568  // [8]
#define VF_OFF_PSI 14576  // [8]
#define VF_OFF_PSIB 14584 // [1] (+7 padding)
#define VF_OFF_HW 14592   // [16][16]: class, channel
#define VF_OFF_HB 14848   // [16]
#define VF_WEIGHTS 14864

#define VF_HALF_MAX 65504.f
// The fused_* kernels compute one n8 tile of logits: at most this many classes; fused_*_k16 two.
#define VF_NARROW_CLASSES 8

// The block's shared memory (VfSmem) comes from the launch (dynamic: a static allocation may not
// exceed 48 KiB); the host learns its size from fused_geometry and asks for it
// (cuFuncSetAttribute). At most VF_SMEM_BYTES, what sm_86/89 allow per block.
#define VF_SMEM_BYTES 101376

// VF_HEAD_SPLIT: the head with f and its weights split into fp16 high and low parts
// (hi*hi + lo*hi + hi*lo: 3 mma per n8 tile instead of 1), close to a float32 head.
// VF_FAST_SIGMOID: the gate's sigmoid with the hardware's approximate exp and divide (a few ulp
// of fp32 off; the attention weight a then multiplies fp16 values). It sits on the slowest warps'
// critical path (docs/perf.md). The host emulator computes it exactly (expf, division).
#ifndef VF_FAST_SIGMOID
#define VF_FAST_SIGMOID 1
#endif
#ifndef VF_HEAD_SPLIT
#define VF_HEAD_SPLIT 1
#endif
// VF_GATE_SPLIT: the conv2 warps, which hold s, also compute the gate's s half (gb + wx.s, the
// first of the gate's two mma) and leave it in shared memory beside s; the dilated-conv warps
// go on from it with the g half. The same sums in the same order as one warp doing both, and
// faster (docs/perf.md). Its buffer does not fit in the shared memory sm_86/89
// give a 12-row block, so sm_80-89 and the PTX leave it out.
#ifndef VF_GATE_SPLIT
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define VF_GATE_SPLIT 0
#else
#define VF_GATE_SPLIT 1
#endif
#endif
// VF_LOADS_FIRST: the convs load a tap's five fragments (A of both rows, B of the three dz)
// before its 12 mma (vf_conv_plane's PF 1); 0 leaves ptxas the order of the source, which it
// kept: each B just before its 4 mma, three ldmatrix latencies per tap (docs/perf.md).
#ifndef VF_LOADS_FIRST
#define VF_LOADS_FIRST 1
#endif
// VF_CONF: the epilogue stores the logits of the planes sampled for the confidence; 0 builds the
// kernel without it, to time what it costs (a variant of gpu-build.sh).
#ifndef VF_CONF
#define VF_CONF 1
#endif
// VF_LOGIT_WORDS: fp16 pairs of logits stored per voxel of a sampled plane: 8 classes' worth
// (4 lanes of 2), 16 in the _k16 build (kernels.FusedLogitWords; count_confidence's words).
#define VF_LOGIT_WORDS(WIDE) ((WIDE) ? 8 : 4)
// VF_WGMMA: the two C -> C convs on Hopper's wgmma (fused_wgmma.cuh) instead of mma.sync: sm_90a
// code only (nvcc defines __CUDA_ARCH_FEAT_SM90_ALL there; the fatbin's sm_90 SASS and PTX keep
// mma.sync); the host emulator builds it with -DVF_WGMMA=1.
#ifndef VF_WGMMA
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VF_WGMMA 1
#else
#define VF_WGMMA 0
#endif
#endif
#if VF_WGMMA
// VF_WG_CONV2, VF_WG_CONVG: which convs run on wgmma in a VF_WGMMA build (the other on mma.sync).
#ifndef VF_WG_CONV2
#define VF_WG_CONV2 1
#endif
#ifndef VF_WG_CONVG
#define VF_WG_CONVG 1
#endif
// VF_WG_N2: the conv2 warps' wgmma N, 48 (three slots at once) or 16.
#ifndef VF_WG_N2
#define VF_WG_N2 48
#endif
static_assert(VF_WG_N2 == 16 || VF_WG_N2 == 48, "fused kernel (wgmma): VF_WG_N2 is 16 or 48");
static_assert(VF_CW % 4 == 0, "fused kernel (wgmma): each kind of conv warp must fill whole warpgroups");
#define VF_WG_B16 (16 * 16 * 2) // one N = 16 B operand: 16 ci x 16 co, fp16
#define VF_WG_B48 (16 * 48 * 2) // one N = 48 B operand
#define VF_WG_W2_BYTES (VF_WG_N2 == 48 ? 3 * 9 * VF_WG_B48 : 27 * VF_WG_B16)
// VF_WG_GPAR: the dilated conv's planes in flight as two rings of three, one per parity of the
// e plane (an e plane feeds only outputs of its own parity), so that a step's three slots are
// one ring, adjacent: N = 48 with rotated weights as conv2 (96 accumulators instead of 80).
#ifndef VF_WG_GPAR
#define VF_WG_GPAR 0
#endif
#define VF_WG_WG_BYTES (VF_WG_GPAR ? 3 * 9 * VF_WG_B48 : 27 * VF_WG_B16)
#endif
#if !VF_WGMMA
#define VF_WG_CONV2 0
#define VF_WG_CONVG 0
#endif
// VF_WSM: some conv runs on mma.sync, which reads the weights from wsm.
#define VF_WSM (!VF_WG_CONV2 || !VF_WG_CONVG)
// Steps of the dilated-conv warps' unrolled loop: their ring of five planes in flight, or the two
// parity rings of three (VF_WG_GPAR).
#if VF_WG_CONVG && VF_WG_GPAR
#define VF_G_RING 6
#else
#define VF_G_RING 5
#endif
#define VF_E_JUNK 8 // words after each e buffer (VfSmem::e)
#define VF_NB 2 // buffers of e planes, s and qs: the one a step reads, the one it makes
// The x ring: slab-relative plane o0-3+k in slot k % VF_XSLOTS; step t loads the plane that conv1
// first reads in step t + 1.
#define VF_XSLOTS 4

struct VfSmem {
	// e planes: [buf][pos*8 + (chunk ^ bit 2 of pos)*4 + word], pos = row*VF_EW + col, 8 fp16
	// channels per chunk, two per word.
	// Each buffer ends in VF_E_JUNK words that conv1's lanes without an e voxel to make store to
	// (vf_conv1_plan), so that its stores need no branch.
	__align__(16) unsigned e[VF_NB][VF_EH * VF_EW * 8 + VF_E_JUNK];
	// Normalised input planes, fp16: [ring slot][copy dx][row][i] = x(tile x -3+dx+i).
	__align__(16) unsigned short x[VF_XSLOTS][3][VF_XH][VF_XW];
	__align__(16) unsigned zero[4]; // the rows of conv1's padding taps 27..31
	// s of the plane just finished, fp32 in accumulator order: [buf][row][n-half][lane][4].
	__align__(16) float s[VF_NB][VF_ROWS][2][32][4];
#if VF_GATE_SPLIT
	// The gate's s half, gb + wx.s (fp32, accumulator order), made by the conv2 warps: [buf][row][lane][4].
	__align__(16) float qs[VF_NB][VF_ROWS][32][4];
#endif

	// Per-lane fragments and biases.
	unsigned w1[2][2][32][2]; // conv1 B: [k step][n half][lane][reg]
	float b1[32][4], b2[32][4], bg[32][4];
	unsigned gx[32][2], gg[32][2], hw[2][32][2], hwl[2][32][2]; // hwl: head weights' fp16 rounding rest
	float gb[32][2], psi[32][2], hb[2][32][2];
	float psib;
	// The convs' weights as fp16 [conv][tap][n = co][k = ci], the two 8-element halves of a row
	// swapped when bit 2 of n is set, so the 8 rows of an ldmatrix phase hit distinct banks.
#if VF_WGMMA
	// The same weights as wgmma's B operands, conv2's and the dilated conv's (vf_wg_imgoff).
	__align__(16) unsigned char w2img[VF_WG_W2_BYTES];
	__align__(16) unsigned char wgimg[VF_WG_WG_BYTES];
#endif
#if VF_WSM
	__align__(16) unsigned short wsm[2][27][16][16];
#endif
};
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
static_assert(sizeof(VfSmem) <= VF_SMEM_BYTES, "fused kernel: VfSmem outgrew what sm_80-89 allow per block");
#endif

// The launch geometry of the fused kernels in this build: tile rows, threads per block, dynamic
// shared memory per block, and which convs run on wgmma (bit 0: conv2, bit 1: the dilated conv)
// (kernels.LoadModule reads it).
extern "C" __device__ const int fused_geometry[4] = {VF_ROWS, VF_THREADS, (int)sizeof(VfSmem),
                                                     VF_WG_CONV2 | VF_WG_CONVG << 1};
