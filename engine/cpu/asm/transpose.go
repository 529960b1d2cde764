package main

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// transposeKernel emits transposeAVX2: rows of [x][cp] to [channel][x], by 8x8 blocks in
// registers (unpack, shuffle, then swap 128-bit halves).
func transposeKernel(c *build.Context) {
	c.Function("transposeAVX2")
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr("func(dst, src *float32, cp, groups, stride int)")
	c.Doc(
		"transposeAVX2 copies 8*groups voxels of cp channels each (cp a multiple of 8) from src,",
		"[x][cp], to dst, [channel][x] with channels stride float32s apart: dst[i*stride+x] =",
		"src[x*cp+i]. Every index must be in bounds: transposeVector checks them.",
	)
	c.Pragma("noescape")
	src := c.Load(c.Param("src"), c.GP64())
	dst := c.Load(c.Param("dst"), c.GP64())
	groups := c.Load(c.Param("groups"), c.GP64())
	cp := c.Load(c.Param("cp"), c.GP64())
	c.SHLQ(operand.U8(2), cp)
	cp3 := c.GP64()
	c.LEAQ(operand.Mem{Base: cp, Index: cp, Scale: 2}, cp3)
	stride := c.Load(c.Param("stride"), c.GP64())
	c.SHLQ(operand.U8(2), stride)
	st3 := c.GP64()
	c.LEAQ(operand.Mem{Base: stride, Index: stride, Scale: 2}, st3)
	c.Label("transpose_group")
	sb, db, b := c.GP64(), c.GP64(), c.Load(c.Param("cp"), c.GP64())
	c.SHRQ(operand.U8(3), b)
	c.MOVQ(src, sb)
	c.MOVQ(dst, db)
	c.Label("transpose_block")
	rows := ymms(c, 8)
	p4 := c.GP64()
	c.LEAQ(operand.Mem{Base: sb, Index: cp, Scale: 4}, p4)
	for v, r := range rows {
		c.VMOVUPS(row8(sb, p4, cp, cp3, v), r)
	}
	cols := transpose8(c, rows)
	c.LEAQ(operand.Mem{Base: db, Index: stride, Scale: 4}, p4)
	for i, r := range cols {
		c.VMOVUPS(r, row8(db, p4, stride, st3, i))
	}
	c.ADDQ(operand.U8(32), sb)
	c.LEAQ(operand.Mem{Base: db, Index: stride, Scale: 8}, db)
	c.DECQ(b)
	c.JNZ(operand.LabelRef("transpose_block"))
	c.LEAQ(operand.Mem{Base: src, Index: cp, Scale: 8}, src)
	c.ADDQ(operand.U8(32), dst)
	c.DECQ(groups)
	c.JNZ(operand.LabelRef("transpose_group"))
	c.VZEROUPPER()
	c.RET()
}

// row8 is the address of row v (0..7) of 8 rows x1 bytes apart from base (p4 = base + 4*x1,
// x3 = 3*x1).
func row8(base, p4, x1, x3 reg.Register, v int) operand.Mem {
	if v >= 4 {
		base, v = p4, v-4
	}
	switch v {
	case 0:
		return operand.Mem{Base: base}
	case 3:
		return operand.Mem{Base: base, Index: x3, Scale: 1}
	}
	return operand.Mem{Base: base, Index: x1, Scale: uint8(v)}
}

// transpose8 returns the columns of the 8x8 matrix whose rows are r: pairs of rows interleaved,
// then quarters gathered by VSHUFPS, then the 128-bit halves swapped into place.
func transpose8(c *build.Context, r []reg.VecVirtual) []reg.VecVirtual {
	t, u, out := ymms(c, 8), ymms(c, 8), ymms(c, 8)
	for q := 0; q < 8; q += 2 {
		// Go operand order: source 2, source 1, destination.
		c.VUNPCKLPS(r[q+1], r[q], t[q])
		c.VUNPCKHPS(r[q+1], r[q], t[q+1])
	}
	for h := 0; h < 8; h += 4 {
		c.VSHUFPS(operand.U8(0x44), t[h+2], t[h], u[h])
		c.VSHUFPS(operand.U8(0xee), t[h+2], t[h], u[h+1])
		c.VSHUFPS(operand.U8(0x44), t[h+3], t[h+1], u[h+2])
		c.VSHUFPS(operand.U8(0xee), t[h+3], t[h+1], u[h+3])
	}
	for i := range 4 {
		c.VPERM2F128(operand.U8(0x20), u[i+4], u[i], out[i])
		c.VPERM2F128(operand.U8(0x31), u[i+4], u[i], out[i+4])
	}
	return out
}
