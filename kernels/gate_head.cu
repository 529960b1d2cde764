// gate_head: attention gate, head and argmax fused; writes uint8 labels, no logits to memory.
//
//   q[j]     = relu((bx[j] + sum_c wx[j][c]*s[c]) + (bg[j] + sum_c wg[j][c]*g[c]))   j < C/2
//   a        = sigmoid(bpsi + sum_j psi[j]*q[j])
//   f[c]     = a*s[c] + g[c]
//   logit[k] = bh[k] + sum_c wh[k][c]*f[c]                                            k < K
//   label    = argmax_k logit[k], the lowest k on ties
//
// One thread per voxel of the nzOut output planes, consecutive threads along x (coalesced).
// s, g: [VP_C][planes][ny][nx] (sPlanes planes each); labels: [nzOut][ny][nx].
// All weights in constant memory, read with warp-uniform addresses.
#include "common.cuh"

__constant__ float c_gate_wx[VP_GATE * VP_C]; // [j][c]
__constant__ float c_gate_bx[VP_GATE];
__constant__ float c_gate_wg[VP_GATE * VP_C];
__constant__ float c_gate_bg[VP_GATE];
__constant__ float c_gate_psi[VP_GATE];
__constant__ float c_gate_psib[1];
__constant__ float c_head_w[VP_MAXK * VP_C]; // [k][c]
__constant__ float c_head_b[VP_MAXK];

extern "C" __global__ void __launch_bounds__(256)
gate_head(const float* __restrict__ s, const float* __restrict__ g, unsigned char* __restrict__ labels,
          int nx, int ny, int nzOut, int sPlanes, int classes) {
	const size_t plane = (size_t)nx * ny;
	const size_t n = (size_t)nzOut * plane;
	const size_t chan = (size_t)sPlanes * plane;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float sv[VP_C], gv[VP_C];
#pragma unroll
		for (int c = 0; c < VP_C; ++c) {
			sv[c] = __ldg(s + c * chan + i);
			gv[c] = __ldg(g + c * chan + i);
		}
		float p = c_gate_psib[0];
#pragma unroll
		for (int j = 0; j < VP_GATE; ++j) {
			float ax = c_gate_bx[j], ag = c_gate_bg[j];
#pragma unroll
			for (int c = 0; c < VP_C; ++c) {
				ax = fmaf(c_gate_wx[j * VP_C + c], sv[c], ax);
				ag = fmaf(c_gate_wg[j * VP_C + c], gv[c], ag);
			}
			p = fmaf(c_gate_psi[j], fmaxf(ax + ag, 0.f), p);
		}
		const float a = 1.f / (1.f + expf(-p));
#pragma unroll
		for (int c = 0; c < VP_C; ++c) sv[c] = fmaf(a, sv[c], gv[c]); // f
		float best = 0.f;
		int label = 0;
#pragma unroll
		for (int k = 0; k < VP_MAXK; ++k) {
			if (k < classes) {
				float l = c_head_b[k];
#pragma unroll
				for (int c = 0; c < VP_C; ++c) l = fmaf(c_head_w[k * VP_C + c], sv[c], l);
				if (k == 0 || l > best) {
					best = l;
					label = k;
				}
			}
		}
		labels[i] = (unsigned char)label;
	}
}
