//go:build cuda

package kernels

import (
	"fmt"
	"os"
	"unsafe"

	"gorgonia.org/cu"
)

// Tiles of the float32 stencil kernels (common.cuh).
const (
	TileX   = 32 // VP_TX
	TileY   = 8  // VP_TY
	TileZ   = 4  // VP_TZ: output z-planes per thread of the stencil kernels
	Threads = TileX * TileY

	gateThreads = 256
)

// MinComputeCapability is the oldest GPU architecture the fatbin has code for (sm_80, Ampere).
const MinComputeCapability = 80

// Module is the loaded fatbin in one CUDA context: the kernels and their constant-memory weights.
// Its methods must run on an OS thread where that context is current.
type Module struct {
	mod cu.Module

	conv1I16, conv1F32, conv2, convg, gateHead   cu.Function
	countConfidence                              cu.Function
	fusedI16, fusedF32, fusedI16K16, fusedF32K16 cu.Function
	fused                                        FusedGeometry

	// Image is where the kernels came from.
	Image Image
}

// Describe says, in words, which kernels the module runs: its image.
func (m *Module) Describe() string { return m.Image.String() }

// ReadFusedGeometry reads fused_geometry from a loaded module (this package's, or a build of
// fused.cu with other settings: lab/bench).
func ReadFusedGeometry(mod cu.Module) (FusedGeometry, error) {
	p, size, err := mod.Global("fused_geometry")
	if err != nil {
		return FusedGeometry{}, fmt.Errorf("kernels: fused_geometry in the fatbin: %w", err)
	}
	var v [4]int32
	if size != int64(unsafe.Sizeof(v)) {
		return FusedGeometry{}, fmt.Errorf("kernels: fused_geometry is %d bytes, want %d", size, unsafe.Sizeof(v))
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&v[0]), p, size); err != nil {
		return FusedGeometry{}, fmt.Errorf("kernels: read fused_geometry: %w", err)
	}
	g := FusedGeometry{Rows: v[0], Threads: v[1], SharedBytes: v[2], WGMMA: v[3]}
	if g.Rows < 1 || g.Threads < 32 || g.Threads%32 != 0 || g.SharedBytes < 1 || g.WGMMA < 0 || g.WGMMA > 3 {
		return FusedGeometry{}, fmt.Errorf("kernels: fused_geometry %+v makes no sense", g)
	}
	return g, nil
}

// FusedGeometry is the launch geometry of this module's fused kernels.
func (m *Module) FusedGeometry() FusedGeometry { return m.fused }

// CheckDevice says, in words, why dev cannot run these kernels (compute capability below 8.0, a
// driver older than CUDA 11.0), or returns nil.
func CheckDevice(dev cu.Device) error {
	name, _ := dev.Name()
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return fmt.Errorf("kernels: compute capability of device %d: %w", int(dev), err)
	}
	if major*10+minor < MinComputeCapability {
		return fmt.Errorf("%w: %s (device %d) has compute capability %d.%d; voxpipe's kernels need 8.0 or newer (Ampere, Ada, Hopper)",
			ErrUnsupported, name, int(dev), major, minor)
	}
	if v := cu.Version(); v < 11000 {
		return fmt.Errorf("%w: the NVIDIA driver supports CUDA %s; voxpipe needs a driver for CUDA 11.0 or newer (11.8+ recommended)",
			ErrUnsupported, DriverVersionString(v))
	}
	return nil
}

// DriverVersionString renders cuDriverGetVersion's number (12040) as "12.4".
func DriverVersionString(v int) string {
	if v < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// LoadModuleFor loads the kernel image ChooseImage picks for dev, with EnvKernels from the
// environment, into the context current on the calling OS thread.
func LoadModuleFor(dev cu.Device) (*Module, error) {
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return nil, fmt.Errorf("kernels: compute capability of device %d: %w", int(dev), err)
	}
	img, _, err := ChooseImage(major, minor, os.Getenv(EnvKernels))
	if err != nil {
		return nil, err
	}
	return loadImage(img)
}

// loadImage loads img into the context current on the calling OS thread. A failure names the
// driver version, the usual cause (a driver too old for the PTX or SASS in the image).
func loadImage(img Image) (*Module, error) {
	mod, err := cu.LoadData(string(img.data))
	if err != nil {
		return nil, fmt.Errorf("%w: load kernels from the %s with a driver for CUDA %s: %v",
			ErrUnsupported, img, DriverVersionString(cu.Version()), err)
	}
	m := &Module{mod: mod, Image: img}
	for _, f := range []struct {
		name string
		fn   *cu.Function
	}{
		{"conv1_i16", &m.conv1I16}, {"conv1_f32", &m.conv1F32}, {"conv2", &m.conv2},
		{"convg", &m.convg}, {"gate_head", &m.gateHead}, {"count_confidence", &m.countConfidence},
		{"fused_i16", &m.fusedI16}, {"fused_f32", &m.fusedF32},
		{"fused_i16_k16", &m.fusedI16K16}, {"fused_f32_k16", &m.fusedF32K16},
	} {
		if *f.fn, err = mod.Function(f.name); err != nil {
			mod.Unload()
			return nil, fmt.Errorf("kernels: function %s in the fatbin: %w", f.name, err)
		}
	}
	if m.fused, err = ReadFusedGeometry(mod); err != nil {
		mod.Unload()
		return nil, err
	}
	for _, fn := range []cu.Function{m.fusedI16, m.fusedF32, m.fusedI16K16, m.fusedF32K16} {
		if err := SetSharedMemory(fn, int(m.fused.SharedBytes)); err != nil {
			mod.Unload()
			return nil, err
		}
	}
	return m, nil
}

// SetSharedMemory lets fn launch with bytes of dynamic shared memory; it fails on a GPU that has
// less per block.
func SetSharedMemory(fn cu.Function, bytes int) error {
	if err := SetMaxDynamicSharedBytes(fn, bytes); err != nil {
		return fmt.Errorf("kernels: fused kernel shared memory (%d bytes): %w", bytes, err)
	}
	return nil
}

// Unload frees the module (its functions and constant memory).
func (m *Module) Unload() error {
	if err := m.mod.Unload(); err != nil {
		return fmt.Errorf("kernels: unload module: %w", err)
	}
	return nil
}

// DeviceWeights are the weights the kernels read from global memory: conv2's and convg's in
// their [ci][tap][co] layout, padded to Channels, and the fused kernel's whole network
// (PackFused).
type DeviceWeights struct {
	W2, B2, WG, BG cu.DevicePtr
	Fused          cu.DevicePtr
	Classes        int32
}

// Free releases the device buffers.
func (d *DeviceWeights) Free() error {
	var first error
	for _, p := range []*cu.DevicePtr{&d.W2, &d.B2, &d.WG, &d.BG, &d.Fused} {
		if *p != 0 {
			if err := cu.MemFree(*p); err != nil && first == nil {
				first = fmt.Errorf("kernels: free weights: %w", err)
			}
			*p = 0
		}
	}
	return first
}

// SetWeights copies w into the module's constant memory (conv1, gate, head) and into new device
// buffers (conv2, convg, and the fused kernel's), transposed and zero-padded to the kernels' sizes. Zero padding leaves
// every label unchanged: padded channels compute relu(0) = 0 and carry weight 0. Synchronous.
func (m *Module) SetWeights(w *Weights) (*DeviceWeights, error) {
	if err := w.check(); err != nil {
		return nil, err
	}
	c, k, g := w.Channels, w.Classes, w.Channels/2

	c1w := make([]float32, 27*Channels) // [tap][co]
	c1b := make([]float32, Channels)
	w2 := make([]float32, Channels*27*Channels) // [ci][tap][co]
	wg := make([]float32, Channels*27*Channels)
	b2 := make([]float32, Channels)
	bg := make([]float32, Channels)
	for co := 0; co < c; co++ {
		for t := 0; t < 27; t++ {
			c1w[t*Channels+co] = w.C1W[co*27+t]
		}
		c1b[co], b2[co], bg[co] = w.C1B[co], w.C2B[co], w.CGB[co]
		for ci := 0; ci < c; ci++ {
			for t := 0; t < 27; t++ {
				w2[(ci*27+t)*Channels+co] = w.C2W[(co*c+ci)*27+t]
				wg[(ci*27+t)*Channels+co] = w.CGW[(co*c+ci)*27+t]
			}
		}
	}
	wx := make([]float32, GateWidth*Channels)
	wgg := make([]float32, GateWidth*Channels)
	bx := make([]float32, GateWidth)
	bgg := make([]float32, GateWidth)
	psi := make([]float32, GateWidth)
	for j := 0; j < g; j++ {
		copy(wx[j*Channels:j*Channels+c], w.WXW[j*c:(j+1)*c])
		copy(wgg[j*Channels:j*Channels+c], w.WGW[j*c:(j+1)*c])
		bx[j], bgg[j], psi[j] = w.WXB[j], w.WGB[j], w.PsiW[j]
	}
	hw := make([]float32, MaxClasses*Channels)
	hb := make([]float32, MaxClasses)
	for kk := 0; kk < k; kk++ {
		copy(hw[kk*Channels:kk*Channels+c], w.HeadW[kk*c:(kk+1)*c])
		hb[kk] = w.HeadB[kk]
	}
	for _, cst := range []struct {
		name string
		v    []float32
	}{
		{"c_conv1_w", c1w}, {"c_conv1_b", c1b},
		{"c_gate_wx", wx}, {"c_gate_bx", bx}, {"c_gate_wg", wgg}, {"c_gate_bg", bgg},
		{"c_gate_psi", psi}, {"c_gate_psib", w.PsiB[:1]},
		{"c_head_w", hw}, {"c_head_b", hb},
	} {
		ptr, size, err := m.mod.Global(cst.name)
		if err != nil {
			return nil, fmt.Errorf("kernels: constant %s: %w", cst.name, err)
		}
		if size != int64(4*len(cst.v)) {
			return nil, fmt.Errorf("kernels: constant %s is %d bytes in the fatbin, want %d", cst.name, size, 4*len(cst.v))
		}
		if err := cu.MemcpyHtoD(ptr, unsafe.Pointer(&cst.v[0]), size); err != nil {
			return nil, fmt.Errorf("kernels: upload %s: %w", cst.name, err)
		}
	}
	d := &DeviceWeights{Classes: int32(k)}
	for _, buf := range []struct {
		dst *cu.DevicePtr
		v   []float32
	}{{&d.W2, w2}, {&d.B2, b2}, {&d.WG, wg}, {&d.BG, bg}, {&d.Fused, PackFused(w)}} {
		p, err := Upload(buf.v)
		if err != nil {
			d.Free()
			return nil, err
		}
		*buf.dst = p
	}
	return d, nil
}

// Upload copies v into a new device buffer (synchronous).
func Upload(v []float32) (cu.DevicePtr, error) {
	n := int64(4 * len(v))
	p, err := cu.MemAlloc(n)
	if err != nil {
		return 0, fmt.Errorf("kernels: allocate %d bytes: %w", n, err)
	}
	if err := cu.MemcpyHtoD(p, unsafe.Pointer(&v[0]), n); err != nil {
		cu.MemFree(p)
		return 0, fmt.Errorf("kernels: upload %d bytes: %w", n, err)
	}
	return p, nil
}
