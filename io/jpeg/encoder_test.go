package jpeg

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// This file is the tests' lossless JPEG encoder (T.81 H.1, process 14): its own predictor and
// table code, independent of the decoder's, checked against dcmdjpeg in restart_test.go.

// encOpts says how to encode.
type encOpts struct {
	w, h, precision, predictor, pt int
	restartRows                    int  // rows a restart interval; 0: no DRI
	randomTable                    bool // a random valid table covering all 17 categories
	tableID                        int  // the DC table's number, 0-3
	extras                         bool // APPn and COM segments, fill bytes before markers
}

// bitWriter writes entropy-coded bits with byte stuffing.
type bitWriter struct {
	out []byte
	acc uint32
	n   uint
}

func (w *bitWriter) put(v uint32, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		w.acc = w.acc<<1 | v>>uint(i)&1
		w.n++
		if w.n == 8 {
			w.out = append(w.out, byte(w.acc))
			if byte(w.acc) == 0xFF {
				w.out = append(w.out, 0)
			}
			w.acc, w.n = 0, 0
		}
	}
}

// flush pads the last byte with 1-bits.
func (w *bitWriter) flush() {
	for w.n != 0 {
		w.put(1, 1)
	}
}

// encPredictors is Table H.1 by selection, written apart from the decoder's predict.
var encPredictors = [8]func(ra, rb, rc int) int{
	1: func(ra, _, _ int) int { return ra },
	2: func(_, rb, _ int) int { return rb },
	3: func(_, _, rc int) int { return rc },
	4: func(ra, rb, rc int) int { return ra + rb - rc },
	5: func(ra, rb, rc int) int { return ra + ((rb - rc) >> 1) },
	6: func(ra, rb, rc int) int { return rb + ((ra - rc) >> 1) },
	7: func(ra, rb, _ int) int { return (ra + rb) >> 1 },
}

// differences returns each sample's difference modulo 2^16 (0-65535) after the point
// transform, with the scan's prediction rules (H.1.2.1).
func differences(px []uint16, o encOpts) []int {
	at := func(x, y int) int { return int(px[y*o.w+x]) >> o.pt }
	d := make([]int, len(px))
	for y := range o.h {
		first := y == 0 || o.restartRows > 0 && y%o.restartRows == 0
		for x := range o.w {
			var p int
			switch {
			case x == 0 && first:
				p = 1 << (o.precision - o.pt - 1)
			case first:
				p = at(x-1, y)
			case x == 0:
				p = at(x, y-1)
			default:
				p = encPredictors[o.predictor](at(x-1, y), at(x, y-1), at(x-1, y-1))
			}
			d[y*o.w+x] = (at(x, y) - p) & 0xFFFF
		}
	}
	return d
}

// category is SSSS of a difference modulo 2^16, and its extra bits.
func category(d int) (ssss int, bits uint32) {
	if d == 32768 {
		return 16, 0
	}
	v := d
	if d > 32768 {
		v = d - 65536
	}
	a := max(v, -v)
	for a>>ssss != 0 {
		ssss++
	}
	if v < 0 {
		v--
	}
	return ssss, uint32(v) & (1<<ssss - 1)
}

// encodeLossless encodes px (precision bits each) as a lossless JPEG stream.
func encodeLossless(px []uint16, o encOpts, rng *rand.Rand) []byte {
	d := differences(px, o)
	var freq [17]int
	for _, v := range d {
		s, _ := category(v)
		freq[s]++
	}
	counts, vals := optimalTable(freq[:])
	if o.randomTable {
		counts, vals = randomTable(17, rng)
	}
	codes, lens := canonicalCodes(counts, vals)
	out := []byte{0xFF, 0xD8}
	if o.extras {
		out = appendSegment(out, 0xE0, []byte("JFIF\x00\x01\x02\x00\x00\x01\x00\x01\x00\x00"))
		out = appendSegment(out, 0xFE, []byte("voxpipe test encoder"))
	}
	dht := append([]byte{byte(o.tableID)}, counts[1:]...)
	out = appendSegment(out, 0xC4, append(dht, vals...))
	if o.restartRows > 0 {
		out = appendSegment(out, 0xDD, binary.BigEndian.AppendUint16(nil, uint16(o.restartRows*o.w)))
	}
	sof := []byte{byte(o.precision), byte(o.h >> 8), byte(o.h), byte(o.w >> 8), byte(o.w), 1, 7, 0x11, 0}
	out = appendSegment(out, 0xC3, sof)
	out = appendSegment(out, 0xDA, []byte{1, 7, byte(o.tableID << 4), byte(o.predictor), 0, byte(o.pt)})
	w := &bitWriter{out: out}
	for i, v := range d {
		if o.restartRows > 0 && i > 0 && i%(o.restartRows*o.w) == 0 {
			w.flush()
			w.out = fill(w.out, o.extras)
			w.out = append(w.out, 0xD0+byte(i/(o.restartRows*o.w)-1)&7)
		}
		s, bits := category(v)
		w.put(codes[s], lens[s])
		if s < 16 {
			w.put(bits, uint(s))
		}
	}
	w.flush()
	return append(fill(w.out, o.extras), 0xD9)
}

// fill appends a marker's 0xFF, after two fill bytes where extras.
func fill(out []byte, extras bool) []byte {
	if extras {
		out = append(out, 0xFF, 0xFF)
	}
	return append(out, 0xFF)
}

func appendSegment(out []byte, m byte, body []byte) []byte {
	out = append(out, 0xFF, m, byte((len(body)+2)>>8), byte(len(body)+2))
	return append(out, body...)
}

// canonicalCodes assigns the codes of BITS/HUFFVAL (T.81 C.2), indexed by value.
func canonicalCodes(counts []byte, vals []byte) (codes [256]uint32, lens [256]uint) {
	code, k := uint32(0), 0
	for l := 1; l <= 16; l++ {
		for range counts[l] {
			codes[vals[k]], lens[vals[k]] = code, uint(l)
			code++
			k++
		}
		code <<= 1
	}
	return codes, lens
}

// optimalTable is a Huffman table for freq limited to 16 bits, as T.81 K.2 (and IJG's
// jpeg_gen_optimal_table) builds it, with a reserved code point so no code is all ones.
func optimalTable(freq []int) (counts []byte, vals []byte) {
	type node struct {
		f    int
		syms []int
	}
	var nodes []node
	for s, f := range freq {
		if f > 0 {
			nodes = append(nodes, node{f, []int{s}})
		}
	}
	nodes = append(nodes, node{0, []int{-1}}) // the reserved all-ones point
	size := make(map[int]int)
	for len(nodes) > 1 {
		sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].f < nodes[j].f })
		a, b := nodes[0], nodes[1]
		for _, s := range append(slices.Clone(a.syms), b.syms...) {
			size[s]++
		}
		nodes = append(nodes[2:], node{a.f + b.f, append(slices.Clone(a.syms), b.syms...)})
	}
	bits := make([]int, 40)
	for _, l := range size {
		bits[l]++
	}
	for i := len(bits) - 1; i > 16; i-- { // K.3 Adjust_BITS
		for bits[i] > 0 {
			j := i - 2
			for bits[j] == 0 {
				j--
			}
			bits[i] -= 2
			bits[i-1]++
			bits[j+1] += 2
			bits[j]--
		}
	}
	i := 16
	for bits[i] == 0 {
		i--
	}
	bits[i]-- // drop the reserved point
	counts = make([]byte, 17)
	for l := 1; l <= 16; l++ {
		counts[l] = byte(bits[l])
	}
	syms := make([]int, 0, len(size))
	for s := range size {
		if s >= 0 {
			syms = append(syms, s)
		}
	}
	sort.Slice(syms, func(a, b int) bool {
		if size[syms[a]] != size[syms[b]] {
			return size[syms[a]] < size[syms[b]]
		}
		return syms[a] < syms[b]
	})
	for _, s := range syms {
		vals = append(vals, byte(s))
	}
	return counts, vals
}

// randomTable is a random valid table of codes for the values 0..n-1, in random order.
func randomTable(n int, rng *rand.Rand) (counts []byte, vals []byte) {
	counts = make([]byte, 17)
	avail, left := 2, n
	p := 1 + rng.IntN(4) // 1: as many short codes as fit; 4: mostly long codes
	for l := 1; l <= 16 && left > 0; l++ {
		c := left // at 16 bits, the rest (the invariant below keeps room for them)
		if l < 16 {
			// After c codes here, (avail-c)*2^(16-l) - 1 points remain for the rest,
			// one kept free so that no code is all ones.
			c = 0
			for c < left && left-c-1 <= (avail-c-1)<<(16-l)-1 && rng.IntN(p) == 0 {
				c++
			}
		}
		counts[l] = byte(c)
		left -= c
		avail = (avail - c) * 2
	}
	for _, v := range rng.Perm(n) {
		vals = append(vals, byte(v))
	}
	return counts, vals
}

// mrImage is an MR-like image: a smooth field plus noise, in [0, 2^precision).
func mrImage(w, h, precision int, rng *rand.Rand) []uint16 {
	top := float64(int(1)<<precision - 1)
	px := make([]uint16, w*h)
	for y := range h {
		for x := range w {
			v := top * (0.35 + 0.25*math.Sin(float64(x)/23)*math.Cos(float64(y)/31) + 0.01*rng.NormFloat64())
			px[y*w+x] = uint16(min(max(v, 0), top))
		}
	}
	return px
}

// noiseImage is uniform noise in [0, 2^precision): every category, up to 16.
func noiseImage(w, h, precision int, rng *rand.Rand) []uint16 {
	px := make([]uint16, w*h)
	for i := range px {
		px[i] = uint16(rng.IntN(1 << precision))
	}
	return px
}
