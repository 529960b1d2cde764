// Command asm generates geometry's amd64 resampling kernels with avo
// (github.com/mmcloughlin/avo): ../combine_amd64.s and its Go declarations
// ../combine_amd64.go. `go generate ./geometry` runs it; TestGeneratedIsCurrent fails when the
// committed files differ from its output. It is a separate main package so that avo stays out
// of the voxpipe binary's dependency graph.
//
// Each kernel is one step of geometry's combine at 8 values a YMM register: d = w*s (set) or
// d += w*s (add), s int16 (sign-extended, converted exactly) or float32. Each product is
// rounded (VMULPS) before it is added (VADDPS), as the Go code does, so they give its bits.
package main

import (
	"fmt"
	"voxpipe/internal/avogen"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() { avogen.Main("combine_amd64.s", "combine_amd64.go", Generate) }

// Generate returns the assembly and the Go declarations of the kernels.
func Generate() (asm, stubs []byte, err error) {
	c := avogen.NewContext()
	for _, src := range []string{"int16", "float32"} {
		for _, add := range []bool{false, true} {
			kernel(c, src, add)
		}
	}
	return avogen.Print(c, "geometry")
}

// Registers.
var (
	d, s, n = reg.RDI, reg.RSI, reg.RCX
	yw      = reg.Y15
	v       = []reg.VecPhysical{reg.Y0, reg.Y1, reg.Y2, reg.Y3}
)

// kernel emits one function: 32 values a step (four registers), then 8.
func kernel(c *build.Context, src string, add bool) {
	name, op := "setAVX2", "d[i] = w * float32(s[i])"
	if add {
		name, op = "addAVX2", "d[i] += w * float32(s[i])"
	}
	size := 2
	if src == "float32" {
		name += "F32"
		size = 4
	} else {
		name += "I16"
	}
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr(fmt.Sprintf("func(d *float32, s *%s, n int, w float32)", src))
	c.Doc(
		fmt.Sprintf("%s is %s for i < n, each product rounded before", name, op),
		"it is added. n must be a multiple of 8 and both arrays that long: combineRow checks.",
	)
	c.Pragma("noescape")
	c.Load(c.Param("d"), d)
	c.Load(c.Param("s"), s)
	c.Load(c.Param("n"), n)
	c.Load(c.Param("w"), reg.X15)
	c.VBROADCASTSS(reg.X15, yw)
	for _, r := range []int{4, 1} {
		loop, next := fmt.Sprintf("%s_loop%d", name, r), fmt.Sprintf("%s_end%d", name, r)
		c.Label(loop)
		c.CMPQ(n, operand.Imm(uint64(8*r)))
		c.JL(operand.LabelRef(next))
		for k := range r {
			at := operand.Mem{Base: s, Disp: 8 * size * k}
			if src == "int16" {
				c.VPMOVSXWD(at, v[k])
				c.VCVTDQ2PS(v[k], v[k])
			} else {
				c.VMOVUPS(at, v[k])
			}
			c.VMULPS(yw, v[k], v[k])
			if add {
				c.VADDPS(operand.Mem{Base: d, Disp: 32 * k}, v[k], v[k])
			}
			c.VMOVUPS(v[k], operand.Mem{Base: d, Disp: 32 * k})
		}
		c.ADDQ(operand.U32(uint64(8*size*r)), s)
		c.ADDQ(operand.U32(uint64(32*r)), d)
		c.SUBQ(operand.U32(uint64(8*r)), n)
		c.JMP(operand.LabelRef(loop))
		c.Label(next)
	}
	c.VZEROUPPER()
	c.RET()
}
