// Command asm generates the CPU engine's amd64 convolution, gate, head and transpose kernels
// with avo (github.com/mmcloughlin/avo): ../kernels_amd64.s and its Go declarations
// ../kernels_amd64.go.
// `go generate ./engine/cpu` runs it; TestGeneratedIsCurrent fails when the committed files
// differ from its output. It is a separate main package so that avo stays out of the voxpipe
// binary's dependency graph.
//
// Each convolution kernel computes one block of 8 output channels (one YMM register) of a convolution (C ->
// C in chunks of 8 or 16 values, or conv1's rows of 3) at n consecutive voxels, 12 at a time (then 4, then 1) so that every weight row loaded is used
// by 12 voxels: for chunk c (in offs order) and value i, the weights w[c*chunk+i] are one YMM
// load and each voxel's input value a VBROADCASTSS. The AVX2 kernels round each product
// (VMULPS) before adding it (VADDPS) in the reference's order, so they equal the pure-Go kernels
// bit for bit; the FMA kernels fuse the two (VFMADD231PS). The gate, head and transpose kernels
// are in gatehead.go and transpose.go.
package main

import (
	"fmt"
	"voxpipe/internal/avogen"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() { avogen.Main("kernels_amd64.s", "kernels_amd64.go", Generate) }

// Generate returns the assembly and the Go declarations of the kernels.
func Generate() (asm, stubs []byte, err error) {
	c := avogen.NewContext()
	for _, chunk := range []int{3, 8, 16} {
		kernel(c, fmt.Sprintf("convAVX2x%d", chunk), chunk, false, false)
		kernel(c, fmt.Sprintf("convFMAx%d", chunk), chunk, true, false)
		kernel(c, fmt.Sprintf("convAVX512x%d", chunk), chunk, false, true)
	}
	gateKernel(c)
	headKernel(c)
	transposeKernel(c)
	return avogen.Print(c, "cpu")
}

// Registers. The kernels name physical registers: 12 accumulators, the weight row and three
// temporaries are all 16 YMM registers, and the 14 general registers below are all there are
// besides SP and BP (R14 and R15 are free in ABI0 functions: the ABI wrapper restores them).
var (
	dst, in, offs, offsEnd = reg.RDI, reg.RSI, reg.RBX, reg.RCX // row pointers; offs and its end
	wBase, bias, n         = reg.R8, reg.R9, reg.RDX            // weights, bias, voxels left
	s1, s3                 = reg.R10, reg.R11                   // the voxel stride in bytes, and 3 times it
	cur, wp                = reg.R12, reg.R13                   // the offs and weight cursors; at the stores, the dst stride in bytes and 3 times it
	p0, p4, p8             = reg.RAX, reg.R14, reg.R15          // voxels 0, 4 and 8 of a chunk (or of dst)
)

// vecRegs are a kernel's vector registers: 12 accumulators, the weight row and three
// temporaries, YMM (8 output channels) or ZMM (16: two blocks of 8 at once).
type vecRegs struct {
	yw   reg.VecPhysical
	tmp  []reg.VecPhysical
	acc  []reg.VecPhysical
	row  int // bytes of a weight row (and of the outputs of one voxel)
	wide bool
}

var (
	ymm = vecRegs{
		yw:  reg.Y12,
		tmp: []reg.VecPhysical{reg.Y13, reg.Y14, reg.Y15},
		acc: []reg.VecPhysical{reg.Y0, reg.Y1, reg.Y2, reg.Y3, reg.Y4, reg.Y5, reg.Y6, reg.Y7, reg.Y8, reg.Y9, reg.Y10, reg.Y11},
		row: 32,
	}
	zmm = vecRegs{
		yw:   reg.Z12,
		tmp:  []reg.VecPhysical{reg.Z13, reg.Z14, reg.Z15},
		acc:  []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7, reg.Z8, reg.Z9, reg.Z10, reg.Z11},
		row:  64,
		wide: true,
	}
)

// kernel emits one function: the loads of its arguments, then groups of 12, 4 and 1 voxels.
// wide: ZMM registers (AVX-512F), 16 output channels, the two blocks' weight rows side by side
// (64 bytes a row), 16 outputs a voxel.
func kernel(c *build.Context, name string, chunk int, fma, wide bool) {
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr("func(dst *float32, in *float32, offs []int, w *float32, bias *float32, n int, stride int, dstStride int)")
	op := "VMULPS then VADDPS, each product rounded: bit-identical to it"
	if fma {
		op = "VFMADD231PS, products not rounded: not bit-identical to it"
	}
	v := ymm
	if wide {
		v = zmm
		op += "; 16 output channels (two blocks, weights side by side)"
	}
	ref := fmt.Sprintf("voxelChunks%d", chunk)
	if chunk == 3 {
		ref = "voxelConv1"
	}
	c.Doc(
		fmt.Sprintf("%s is %s at n consecutive voxels, stride float32s apart in in and", name, ref),
		fmt.Sprintf("dstStride in dst (%s).", op),
		"len(offs) must be > 0 and every index in bounds: convVector checks them.",
	)
	c.Pragma("noescape")
	c.Load(c.Param("dst"), dst)
	c.Load(c.Param("in"), in)
	c.Load(c.Param("offs").Base(), offs)
	c.Load(c.Param("offs").Len(), offsEnd)
	c.LEAQ(operand.Mem{Base: offs, Index: offsEnd, Scale: 8}, offsEnd)
	c.Load(c.Param("w"), wBase)
	c.Load(c.Param("bias"), bias)
	c.Load(c.Param("n"), n)
	c.Load(c.Param("stride"), s1)
	c.SHLQ(operand.U8(2), s1)
	c.LEAQ(operand.Mem{Base: s1, Index: s1, Scale: 2}, s3)
	for _, r := range []int{12, 4, 1} {
		group(c, name, chunk, r, fma, v)
	}
	c.Label(name + "_done")
	c.VZEROUPPER()
	c.RET()
}

// voxel is the address of voxel v (0..11) of the row at p0 whose voxels are x1 bytes apart (x3
// holding 3*x1), plus disp bytes.
func voxel(v, disp int, x1, x3 reg.Register) operand.Mem {
	base := []reg.Register{p0, p4, p8}[v/4]
	switch v % 4 {
	case 0:
		return operand.Mem{Base: base, Disp: disp}
	case 3:
		return operand.Mem{Base: base, Index: x3, Scale: 1, Disp: disp}
	default:
		return operand.Mem{Base: base, Index: x1, Scale: uint8(v % 4), Disp: disp}
	}
}

// bases sets p4 and p8 from p0 for a group of r voxels x1 bytes apart.
func bases(c *build.Context, r int, x1 reg.Register) {
	if r > 4 {
		c.LEAQ(operand.Mem{Base: p0, Index: x1, Scale: 4}, p4)
		c.LEAQ(operand.Mem{Base: p0, Index: x1, Scale: 8}, p8)
	}
}

// group emits the loop over groups of r voxels: accumulators from the bias, every chunk's
// multiply-adds, relu, the stores, and the step to the next group.
func group(c *build.Context, name string, chunk, r int, fma bool, vr vecRegs) {
	yw, tmp, acc := vr.yw, vr.tmp, vr.acc
	loop := fmt.Sprintf("%s_group%d", name, r)
	next := fmt.Sprintf("%s_end%d", name, r)
	chunks := fmt.Sprintf("%s_chunks%d", name, r)
	c.Label(loop)
	c.CMPQ(n, operand.Imm(uint64(r)))
	c.JL(operand.LabelRef(next))
	c.VMOVUPS(operand.Mem{Base: bias}, acc[0])
	for v := 1; v < r; v++ {
		c.VMOVAPS(acc[0], acc[v])
	}
	c.MOVQ(offs, cur)
	c.MOVQ(wBase, wp)
	c.Label(chunks)
	c.MOVQ(operand.Mem{Base: cur}, p0)
	c.LEAQ(operand.Mem{Base: in, Index: p0, Scale: 4}, p0)
	bases(c, r, s1)
	for i := range chunk {
		c.VMOVUPS(operand.Mem{Base: wp, Disp: vr.row * i}, yw)
		for v := range r {
			t := tmp[v%len(tmp)]
			c.VBROADCASTSS(voxel(v, 4*i, s1, s3), t)
			if fma {
				c.VFMADD231PS(yw, t, acc[v])
			} else {
				c.VMULPS(yw, t, t)
				c.VADDPS(t, acc[v], acc[v])
			}
		}
	}
	c.ADDQ(operand.U32(uint64(vr.row*chunk)), wp)
	c.ADDQ(operand.U8(8), cur)
	c.CMPQ(cur, offsEnd)
	c.JB(operand.LabelRef(chunks))
	// relu as max(a, +0): VMAXPS returns its second source (here +0) unless a > 0, so NaN and
	// -0 become +0 as in relu.
	if vr.wide {
		c.VPXORD(tmp[0], tmp[0], tmp[0])
	} else {
		c.VXORPS(tmp[0], tmp[0], tmp[0])
	}
	c.Load(c.Param("dstStride"), cur)
	c.SHLQ(operand.U8(2), cur)
	c.LEAQ(operand.Mem{Base: cur, Index: cur, Scale: 2}, wp)
	c.MOVQ(dst, p0)
	bases(c, r, cur)
	for v := range r {
		c.VMAXPS(tmp[0], acc[v], acc[v])
		c.VMOVUPS(acc[v], voxel(v, 0, cur, wp))
	}
	step(c, r, in, s1, s3)
	step(c, r, dst, cur, wp)
	c.SUBQ(operand.Imm(uint64(r)), n)
	c.JMP(operand.LabelRef(loop))
	c.Label(next)
}

// step advances p by r voxels x1 bytes apart (x3 holding 3*x1).
func step(c *build.Context, r int, p, x1, x3 reg.Register) {
	switch r {
	case 12:
		c.LEAQ(operand.Mem{Base: p, Index: x3, Scale: 4}, p)
	case 4:
		c.LEAQ(operand.Mem{Base: p, Index: x1, Scale: 4}, p)
	default:
		c.ADDQ(x1, p)
	}
}
