// Package model holds voxpipe's network: its exact specification, the weights file and its
// card, the normalisation of a volume's values, the volume the engines read, the model's
// confidence, and the domain check against the card. The engines that run it are engine/cpu
// and engine/cuda.
//
// The network, tensors [channel][z][y][x] with x fastest:
//
//	x      = (v - mu) / sigma                 (computed as v*Norm.Scale + Norm.Shift)
//	e      = relu(conv3x3x3(x; c1))            1 -> C, zero padding 1
//	s      = relu(conv3x3x3(e; c2))            C -> C, zero padding 1
//	g      = relu(conv3x3x3 dilation 2(e; cg)) C -> C, zero padding 2
//	q      = relu(wx(s) + wg(g))               1x1x1, C -> C/2
//	a      = sigmoid(psi(q))                   1x1x1, C/2 -> 1
//	f      = a*s + g
//	logits = head(f)                           1x1x1, C -> K
//	label  = argmax_k logits (lowest k on ties)
package model

// Halo is how many z-slices on each side of an output slab the network reads: conv1 (1) then the
// dilated conv (2).
const Halo = 3

// Model is a set of weights for the network. Weight layouts are PyTorch's Conv3d layouts,
// flattened row-major: c1W [C][1][3][3][3], c2W and cgW [C][C][3][3][3], wxW and wgW [C/2][C],
// psiW [1][C/2], headW [K][C].
type Model struct {
	Channels    int      // C
	Classes     int      // K
	ClassNames  []string // len K
	Description string   // training data and provenance, from the file's metadata
	Card        *Card    // the model card; nil for a weights file written without one

	C1W, C1B     []float32
	C2W, C2B     []float32
	CGW, CGB     []float32
	WXW, WXB     []float32
	WGW, WGB     []float32
	PsiW, PsiB   []float32
	HeadW, HeadB []float32
}

// Gate is the attention gate's width, C/2.
func (m *Model) Gate() int { return m.Channels / 2 }

// FLOPsPerVoxel is the arithmetic the network does per output voxel, counting a multiply-add as
// 2 and leaving out biases, ReLUs, the sigmoid and the argmax:
//
//	conv1 2*27*C + conv2 2*27*C*C + dilated conv 2*27*C*C + wx, wg 2*2*(C/2)*C
//	+ psi 2*(C/2) + gate a*s+g 2*C + head 2*K*C
//
// that is 108*C^2 + 2*C^2 + 54*C + C + 2*C + 2*K*C; 29200 for C=16, K=4.
func FLOPsPerVoxel(channels, classes int) float64 {
	c, k := float64(channels), float64(classes)
	g := float64(channels / 2)
	return 2*27*c + 2*2*27*c*c + 2*2*g*c + 2*g + 2*c + 2*k*c
}
