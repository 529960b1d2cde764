package model

// Norm is the affine map from stored voxel values to the network's input:
// x = float32(v)*Scale + Shift, with scl_slope/scl_inter, mu and sigma folded in.
type Norm struct {
	Scale, Shift float32
}

// Volume is one input volume in host memory, stored values (before scl_slope/scl_inter) in
// exactly one of I16 or F32, x fastest. Engines read it; nobody writes it while they run.
// For the CUDA engine these slices are pinned host memory.
type Volume struct {
	NX, NY, NZ int
	I16        []int16
	F32        []float32
	Norm       Norm
}

// ElemSize is the bytes of one stored value: 2 for I16, 4 for F32.
func (v *Volume) ElemSize() int {
	if v.I16 != nil {
		return 2
	}
	return 4
}
