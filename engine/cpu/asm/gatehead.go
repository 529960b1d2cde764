package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The gate and head kernels put one voxel in each lane: their inputs are rows transposed to
// [channel][x] (stride float32s from one channel to the next, n voxels a row, n a multiple of
// 8), weights are broadcast, and each lane sums its voxel's terms in the reference's order,
// each product rounded (VMULPS then VADDPS), so they equal the pure-Go gate and head bit for
// bit. They take 32 voxels (4 YMM registers) a pass, then 8. Registers are virtual: avo
// allocates them.

// gateKernel emits gateAVX2: p[x] = psi(relu(wx(s) + wg(g))) before the sigmoid.
func gateKernel(c *build.Context) {
	rowKernel(c, "gateAVX2", "func(p, sv, gv, wx, bx, wg, bg, psiw, psib *float32, c, gate, n, stride int)", []string{"sv", "gv", "p"}, gateGroup,
		"gateAVX2 is, for each of n voxels x (a multiple of 8), the pre-sigmoid value of the gate:",
		"p[x] = psib + sum over j of psiw[j]*relu((bx[j] + sum over i of wx[j*c+i]*sv[i*stride+x]) +",
		"(bg[j] + sum over i of wg[j*c+i]*gv[i*stride+x])), in that order, each product rounded:",
		"bit-identical to gateHeadRow. Every index must be in bounds: gateVector checks them.",
	)
}

// rowKernel emits a kernel: its declaration and documentation, the loads of the row pointers
// named in rows, of n and of the stride (in bytes), then group's loops for passes of 4
// registers of 8 voxels and of 1.
func rowKernel(c *build.Context, name, sig string, rows []string, group func(c *build.Context, r int, rows []reg.Register, n, stride reg.Register), doc ...string) {
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr(sig)
	c.Doc(doc...)
	c.Pragma("noescape")
	var regs []reg.Register
	for _, p := range rows {
		regs = append(regs, c.Load(c.Param(p), c.GP64()))
	}
	n := c.Load(c.Param("n"), c.GP64())
	stride := c.Load(c.Param("stride"), c.GP64())
	c.SHLQ(operand.U8(2), stride)
	for _, r := range []int{4, 1} {
		group(c, r, regs, n, stride)
	}
	c.VZEROUPPER()
	c.RET()
}

// gateGroup emits gateAVX2's loop over passes of r registers of 8 voxels; rows are the s, g
// and p pointers.
func gateGroup(c *build.Context, r int, rows []reg.Register, n, stride reg.Register) {
	sBase, gBase, pOut := rows[0], rows[1], rows[2]
	loop, next, jloop := fmt.Sprintf("gate_group%d", r), fmt.Sprintf("gate_end%d", r), fmt.Sprintf("gate_j%d", r)
	c.Label(loop)
	c.CMPQ(n, operand.Imm(uint64(8*r)))
	c.JL(operand.LabelRef(next))
	p, ax, ag := ymms(c, r), ymms(c, r), ymms(c, r)
	psib := c.Load(c.Param("psib"), c.GP64())
	for v := range r {
		c.VBROADCASTSS(operand.Mem{Base: psib}, p[v])
	}
	wx := c.Load(c.Param("wx"), c.GP64())
	wg := c.Load(c.Param("wg"), c.GP64())
	bx := c.Load(c.Param("bx"), c.GP64())
	bg := c.Load(c.Param("bg"), c.GP64())
	psiw := c.Load(c.Param("psiw"), c.GP64())
	j := c.Load(c.Param("gate"), c.GP64())
	c.Label(jloop)
	dot(c, fmt.Sprintf("gate_x%d", r), ax, bx, wx, sBase, stride)
	dot(c, fmt.Sprintf("gate_g%d", r), ag, bg, wg, gBase, stride)
	zero, pw := c.YMM(), c.YMM()
	c.VXORPS(zero, zero, zero)
	c.VBROADCASTSS(operand.Mem{Base: psiw}, pw)
	for v := range r {
		c.VADDPS(ag[v], ax[v], ax[v])
		// relu as max(a, +0): VMAXPS returns its second source (+0) unless a > 0.
		c.VMAXPS(zero, ax[v], ax[v])
		c.VMULPS(pw, ax[v], ax[v])
		c.VADDPS(ax[v], p[v], p[v])
	}
	for _, q := range []reg.Register{bx, bg, psiw} {
		c.ADDQ(operand.U8(4), q)
	}
	c.DECQ(j)
	c.JNZ(operand.LabelRef(jloop))
	for v := range r {
		c.VMOVUPS(p[v], operand.Mem{Base: pOut, Disp: 32 * v})
	}
	for _, q := range rows {
		c.ADDQ(operand.U32(32*r), q)
	}
	c.SUBQ(operand.Imm(uint64(8*r)), n)
	c.JMP(operand.LabelRef(loop))
	c.Label(next)
}

// dot emits acc[v] = *b + sum over the c channels i of w[i]*in[i*stride + 8v], in that order,
// each product rounded; w advances by c float32s (to the next row of weights).
func dot(c *build.Context, label string, acc []reg.VecVirtual, b, w, in, stride reg.Register) {
	for v := range acc {
		c.VBROADCASTSS(operand.Mem{Base: b}, acc[v])
	}
	cur := c.GP64()
	c.MOVQ(in, cur)
	i := c.Load(c.Param("c"), c.GP64())
	c.Label(label)
	wv, t := c.YMM(), c.YMM()
	c.VBROADCASTSS(operand.Mem{Base: w}, wv)
	for v := range acc {
		c.VMULPS(operand.Mem{Base: cur, Disp: 32 * v}, wv, t)
		c.VADDPS(t, acc[v], acc[v])
	}
	c.ADDQ(operand.U8(4), w)
	c.ADDQ(stride, cur)
	c.DECQ(i)
	c.JNZ(operand.LabelRef(label))
}

// headKernel emits headAVX2: f = a*s + g (into s), then the logits.
func headKernel(c *build.Context) {
	rowKernel(c, "headAVX2", "func(l, sv, gv, a, hw, hb *float32, c, k, n, stride int)", []string{"sv", "gv", "a", "l"}, headGroup,
		"headAVX2 is, for each of n voxels x (a multiple of 8), the gated features and the head:",
		"sv[i*stride+x] = a[x]*sv[i*stride+x] + gv[i*stride+x], then l[k*stride+x] = hb[k] + sum over i",
		"of hw[k*c+i]*sv[i*stride+x], in that order, each product rounded: bit-identical to",
		"gateHeadRow. Every index must be in bounds: headVector checks them.",
	)
}

// headGroup emits headAVX2's loop over passes of r registers of 8 voxels; rows are the s, g, a
// and l pointers.
func headGroup(c *build.Context, r int, rows []reg.Register, n, stride reg.Register) {
	sBase, gBase, aBase, lBase := rows[0], rows[1], rows[2], rows[3]
	loop, next := fmt.Sprintf("head_group%d", r), fmt.Sprintf("head_end%d", r)
	floop, kloop := fmt.Sprintf("head_f%d", r), fmt.Sprintf("head_k%d", r)
	c.Label(loop)
	c.CMPQ(n, operand.Imm(uint64(8*r)))
	c.JL(operand.LabelRef(next))
	a := ymms(c, r)
	for v := range r {
		c.VMOVUPS(operand.Mem{Base: aBase, Disp: 32 * v}, a[v])
	}
	cs, cg := c.GP64(), c.GP64()
	c.MOVQ(sBase, cs)
	c.MOVQ(gBase, cg)
	i := c.Load(c.Param("c"), c.GP64())
	c.Label(floop)
	for v := range r {
		t := c.YMM()
		c.VMULPS(operand.Mem{Base: cs, Disp: 32 * v}, a[v], t)
		c.VADDPS(operand.Mem{Base: cg, Disp: 32 * v}, t, t)
		c.VMOVUPS(t, operand.Mem{Base: cs, Disp: 32 * v})
	}
	c.ADDQ(stride, cs)
	c.ADDQ(stride, cg)
	c.DECQ(i)
	c.JNZ(operand.LabelRef(floop))
	hw := c.Load(c.Param("hw"), c.GP64())
	hb := c.Load(c.Param("hb"), c.GP64())
	lc := c.GP64()
	c.MOVQ(lBase, lc)
	k := c.Load(c.Param("k"), c.GP64())
	c.Label(kloop)
	l := ymms(c, r)
	dot(c, fmt.Sprintf("head_i%d", r), l, hb, hw, sBase, stride)
	for v := range r {
		c.VMOVUPS(l[v], operand.Mem{Base: lc, Disp: 32 * v})
	}
	c.ADDQ(operand.U8(4), hb)
	c.ADDQ(stride, lc)
	c.DECQ(k)
	c.JNZ(operand.LabelRef(kloop))
	for _, q := range rows {
		c.ADDQ(operand.U32(32*r), q)
	}
	c.SUBQ(operand.Imm(uint64(8*r)), n)
	c.JMP(operand.LabelRef(loop))
	c.Label(next)
}

func ymms(c *build.Context, r int) []reg.VecVirtual {
	out := make([]reg.VecVirtual, r)
	for v := range out {
		out[v] = c.YMM()
	}
	return out
}
