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
// The foreground's margins (best minus second-best logit) on the sampled planes (z0 + plane a
// multiple of VP_CONF_STRIDE, z0 the first output plane's z in the volume) go to conf
// (common.cuh's VpConf): per thread, then one atomic per warp and counter.
#include "common.cuh"

__constant__ float c_gate_wx[VP_GATE * VP_C]; // [j][c]
__constant__ float c_gate_bx[VP_GATE];
__constant__ float c_gate_wg[VP_GATE * VP_C];
__constant__ float c_gate_bg[VP_GATE];
__constant__ float c_gate_psi[VP_GATE];
__constant__ float c_gate_psib[1];
__constant__ float c_head_w[VP_MAXK * VP_C]; // [k][c]
__constant__ float c_head_b[VP_MAXK];

// count_confidence adds a slab's confidence to conf: the voxels of each label of its nzOut
// planes of labels (VP_CONF_LABELS + label) and, when logits is not null (the fused kernel's),
// the foreground's margins on its sampled planes (VP_CONF_FG, _MARGIN, _LOW): logits holds
// those planes in order (vp_margin_index), each voxel's logits as fp16 pairs, words of them;
// the margin is the labelled class's logit minus the best of the others. z0 is the slab's first
// plane in the volume.
// Labels: each thread counts a label's bytes in the words it reads (__vcmpeq4, __popc: 8 bits a
// byte), the warp sums them, lane 0 adds them; the bytes of the last word beyond the slab are set
// to 0xff, no class (the label buffers have guard bytes after them). Margins: per thread, then
// one atomic per warp and counter (vp_conf_flush).
extern "C" __global__ void __launch_bounds__(256)
count_confidence(const unsigned char* __restrict__ labels, const unsigned* __restrict__ logits, int words,
                 unsigned long long* __restrict__ conf, long long plane, int z0, int nzOut, int classes) {
	const long long n = plane * nzOut, nw = (n + 3) / 4;
	const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x, stride = (long long)gridDim.x * blockDim.x;
	unsigned bits[VP_MAXK]; // 8 a byte of label k
#pragma unroll
	for (int k = 0; k < VP_MAXK; ++k) bits[k] = 0;
	for (long long w = first; w < nw; w += stride) {
		unsigned v = __ldg(reinterpret_cast<const unsigned*>(labels) + w);
		const long long valid = n - 4 * w; // bytes of the word inside the slab
		if (valid < 4) v |= 0xffffffffu << (8 * valid);
#pragma unroll
		for (int k = 0; k < VP_MAXK; ++k)
			if (k < classes) bits[k] += __popc(vp_vcmpeq4(v, 0x01010101u * (unsigned)k));
	}
#pragma unroll
	for (int k = 0; k < VP_MAXK; ++k) {
		if (k >= classes) break;
		unsigned long long c = bits[k] / 8;
#pragma unroll
		for (int off = 16; off > 0; off >>= 1) c += vp_shfl_xor_u64(c, off);
		if ((threadIdx.x & 31) == 0 && c) atomicAdd(conf + VP_CONF_LABELS + k, c);
	}
	if (logits == nullptr) return;
	const int zs = (z0 + VP_CONF_STRIDE - 1) / VP_CONF_STRIDE * VP_CONF_STRIDE; // the first sampled plane
	const long long m = (long long)vp_margin_planes(z0, nzOut) * plane;
	VpConf cf{0u, 0u, 0u};
	for (long long j = first; j < m; j += stride) {
		const long long sp = j / plane, i = j - sp * plane;
		const int label = __ldg(labels + (zs - z0 + sp * VP_CONF_STRIDE) * plane + i);
		if (label <= 0 || label >= classes) continue;
		const unsigned* lw = logits + j * words;
		float best = 0.f, second = -__builtin_huge_valf();
		for (int k = 0; k < classes; ++k) {
			const unsigned p = __ldg(lw + k / 2);
			const float l = vp_half_float((unsigned short)(k & 1 ? p >> 16 : p & 0xffffu));
			if (k == label) best = l;
			else second = fmaxf(second, l);
		}
		cf.add(label, best, second);
	}
	vp_conf_flush(conf, cf);
}

extern "C" __global__ void __launch_bounds__(256)
gate_head(const float* __restrict__ s, const float* __restrict__ g, unsigned char* __restrict__ labels,
          unsigned long long* __restrict__ conf, int nx, int ny, int z0, int nzOut, int sPlanes, int classes) {
	const size_t plane = (size_t)nx * ny;
	const size_t n = (size_t)nzOut * plane;
	const size_t chan = (size_t)sPlanes * plane;
	VpConf cf{0u, 0u, 0u};
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
		float best = 0.f, second = -__builtin_huge_valf();
		int label = 0;
#pragma unroll
		for (int k = 0; k < VP_MAXK; ++k) {
			if (k < classes) {
				float l = c_head_b[k];
#pragma unroll
				for (int c = 0; c < VP_C; ++c) l = fmaf(c_head_w[k * VP_C + c], sv[c], l);
				if (k == 0) {
					best = l;
				} else if (l > best) {
					second = best;
					best = l;
					label = k;
				} else if (l > second) {
					second = l;
				}
			}
		}
		labels[i] = (unsigned char)label;
		if (vp_conf_plane(z0 + (long long)(i / plane))) cf.add(label, best, second);
	}
	vp_conf_flush(conf, cf);
}
