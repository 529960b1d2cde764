package volstats

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// scan is one Compute call's input, shared read-only by the workers, except moments, whose
// entries of plane z only the worker of z's range writes.
type scan struct {
	nx, ny, nz int
	mask       []uint8
	nl         int                         // labels, plus the sink of unlisted values
	lut        *[256]int                   // mask value -> label index
	moments    []moment                    // [z*nl + label index]
	sum        func(i0, i1 int, m *moment) // adds image[i0:i1] to m; nil without an image
}

// plane is the runs of one z-plane, row by row, each a maximal x-run [x0, x1) of one value.
type plane struct {
	x0, x1 []int32
	val    []uint8
	row    []int32 // the runs of row y are [row[y], row[y+1])
}

type bbox struct{ min, max [3]int }

// chunk is what a z-range contributes: per label index its voxels, bounding box, runs and the
// unions that joined two of its sets (components = runs - merges), and its first and last
// planes with the set of each run, numbered 0..nsets-1 over both, for the join.
type chunk struct {
	voxels, runs, merges []int64
	bbox                 []bbox
	first, last          *plane
	firstID, lastID      []int32
}

// unionFind over run indices, linking the larger root under the smaller one, so the runs kept
// first (the first plane) stay the roots of their sets.
type unionFind []int32

func (u unionFind) find(i int32) int32 {
	for u[i] != i {
		u[i] = u[u[i]] // path halving
		i = u[i]
	}
	return i
}

// union joins the sets of a and b and says whether they were apart.
func (u unionFind) union(a, b int32) bool {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return false
	}
	if ra < rb {
		u[rb] = ra
	} else {
		u[ra] = rb
	}
	return true
}

// touching calls f(i, k) for each run i of p's row ya and run k of q's row yb that hold the same
// value and have voxels within one of each other along x, which is 26-adjacency for runs of
// neighbouring rows: [a0, a1) and [b0, b1) touch when b1 >= a0 and b0 <= a1.
func touching(p *plane, ya int, q *plane, yb int, f func(i, k int32)) {
	b, bEnd := q.row[yb], q.row[yb+1]
	for i := p.row[ya]; i < p.row[ya+1]; i++ {
		a0, a1, v := p.x0[i], p.x1[i], p.val[i]
		for b < bEnd && q.x1[b] < a0 {
			b++
		}
		for k := b; k < bEnd && q.x0[k] <= a1; k++ {
			if q.val[k] == v {
				f(i, k)
			}
		}
	}
}

// run scans planes z0..z1-1.
func (s *scan) run(z0, z1 int) *chunk {
	c := &chunk{voxels: make([]int64, s.nl), runs: make([]int64, s.nl), merges: make([]int64, s.nl), bbox: make([]bbox, s.nl)}
	for i := range c.bbox {
		c.bbox[i] = bbox{min: [3]int{math.MaxInt, math.MaxInt, math.MaxInt}, max: [3]int{-1, -1, -1}}
	}
	var u runSets
	var first, prev, cur, free *plane
	nFirst, prevBase := 0, 0
	for z := z0; z < z1; z++ {
		cur, free = free, nil
		if cur == nil {
			cur = &plane{row: make([]int32, s.ny+1)}
		}
		s.cut(z, cur, c)
		base := s.link(&u, c, cur, prev, prevBase)
		if first == nil {
			first, nFirst = cur, len(cur.val)
			prev, prevBase = cur, 0
			continue
		}
		u.compact(nFirst, base, len(cur.val))
		if prev != first {
			free = prev
		}
		prev, prevBase = cur, nFirst
	}
	c.first, c.last = first, prev
	u.endIDs(c, nFirst, prevBase)
	return c
}

// runSets holds a z-range's runs in a union-find: the first plane's runs at [0, nFirst), the
// previous plane's at [prevBase, prevBase+len) and the current plane's after them; after each
// plane it is compacted to the first plane's and the current plane's.
type runSets struct {
	uf, spare  unionFind
	stamp, rep []int32 // compaction scratch: rep[root] is valid where stamp[root] == gen
	gen        int32
}

// link adds plane cur's runs to u and unions those that touch within cur and, unless prev
// is nil, those touching prev's runs (at prevBase), counting the merges in c. It returns
// where cur's runs start in u.
func (s *scan) link(u *runSets, c *chunk, cur, prev *plane, prevBase int) int {
	base := len(u.uf)
	for i := range len(cur.val) {
		u.uf = append(u.uf, int32(base+i))
	}
	uf := u.uf
	// join unions runs a and b, of value v, counting a merge when they were apart.
	join := func(a, b int32, v uint8) {
		if uf.union(a, b) {
			c.merges[s.lut[v]]++
		}
	}
	for y := range s.ny {
		if y > 0 {
			touching(cur, y, cur, y-1, func(i, k int32) { join(int32(base)+i, int32(base)+k, cur.val[i]) })
		}
		if prev == nil {
			continue
		}
		for yb := max(y-1, 0); yb <= min(y+1, s.ny-1); yb++ {
			touching(cur, y, prev, yb, func(i, k int32) { join(int32(base)+i, int32(prevBase)+k, cur.val[i]) })
		}
	}
	return base
}

// compact keeps only the first plane's runs (nFirst) and the current plane's (nCur, at
// base): [first plane | current plane], each set renumbered to its first kept run.
func (u *runSets) compact(nFirst, base, nCur int) {
	if cap(u.stamp) < len(u.uf) {
		u.stamp, u.rep = make([]int32, len(u.uf), 2*len(u.uf)), make([]int32, len(u.uf), 2*len(u.uf))
	}
	u.stamp, u.rep = u.stamp[:len(u.uf)], u.rep[:len(u.uf)]
	u.gen++
	u.spare = u.spare[:0]
	keep := func(k int32) {
		r := u.uf.find(k)
		if u.stamp[r] != u.gen {
			u.stamp[r], u.rep[r] = u.gen, int32(len(u.spare))
		}
		u.spare = append(u.spare, u.rep[r])
	}
	for k := range int32(nFirst) {
		keep(k)
	}
	for k := range int32(nCur) {
		keep(int32(base) + k)
	}
	u.uf, u.spare = u.spare, u.uf
}

// endIDs numbers the sets of c's first and last planes 0, 1, ... (the last plane's runs at
// lastBase).
func (u *runSets) endIDs(c *chunk, nFirst, lastBase int) {
	ids := map[int32]int32{}
	id := func(k int32) int32 {
		r := u.uf.find(k)
		n, ok := ids[r]
		if !ok {
			n = int32(len(ids))
			ids[r] = n
		}
		return n
	}
	c.firstID = make([]int32, nFirst)
	for k := range int32(nFirst) {
		c.firstID[k] = id(k)
	}
	if c.last == c.first {
		c.lastID = c.firstID
	} else {
		c.lastID = make([]int32, len(c.last.val))
		for k := range int32(len(c.last.val)) {
			c.lastID[k] = id(int32(lastBase) + k)
		}
	}
}

// cut splits plane z into runs (into p, reusing its memory) and adds each run to its label's
// voxels, runs, bounding box and intensity sums.
func (s *scan) cut(z int, p *plane, c *chunk) {
	p.x0, p.x1, p.val = p.x0[:0], p.x1[:0], p.val[:0]
	p.row[0] = 0
	for y := range s.ny {
		start := (z*s.ny + y) * s.nx
		row := s.mask[start : start+s.nx]
		for x := 0; x < len(row); {
			v := row[x]
			e := runEnd(row, x)
			p.x0, p.x1, p.val = append(p.x0, int32(x)), append(p.x1, int32(e)), append(p.val, v)
			l := s.lut[v]
			c.voxels[l] += int64(e - x)
			c.runs[l]++
			bb := &c.bbox[l]
			bb.min[0], bb.max[0] = min(bb.min[0], x), max(bb.max[0], e-1)
			bb.min[1], bb.max[1] = min(bb.min[1], y), max(bb.max[1], y)
			bb.min[2], bb.max[2] = min(bb.min[2], z), max(bb.max[2], z)
			if s.sum != nil {
				s.sum(start+x, start+e, &s.moments[z*s.nl+l])
			}
			x = e
		}
		p.row[y+1] = int32(len(p.val))
	}
}

// runEnd is the end of the run of row[x]'s value that starts at x, found 8 bytes at a time.
func runEnd(row []uint8, x int) int {
	v := row[x]
	pat := uint64(v) * 0x0101010101010101
	e := x + 1
	for e+8 <= len(row) {
		if w := binary.LittleEndian.Uint64(row[e:]) ^ pat; w != 0 {
			return e + bits.TrailingZeros64(w)/8
		}
		e += 8
	}
	for e < len(row) && row[e] == v {
		e++
	}
	return e
}

// totals are the chunks joined: per label index, voxels, bounding box and components.
type totals struct {
	voxels     []int64
	components []int
	bbox       []bbox
}

// joinChunks adds up the chunks and joins the sets of each chunk's last plane with those of
// the next chunk's first plane that they touch.
func joinChunks(cs []*chunk, nl int, lut *[256]int) *totals {
	t := &totals{voxels: make([]int64, nl), components: make([]int, nl), bbox: make([]bbox, nl)}
	comps := make([]int64, nl)
	offset := make([]int32, len(cs)+1)
	for k, c := range cs {
		for l := range nl {
			t.voxels[l] += c.voxels[l]
			comps[l] += c.runs[l] - c.merges[l]
			if k == 0 {
				t.bbox[l] = c.bbox[l]
				continue
			}
			for a := range 3 {
				t.bbox[l].min[a] = min(t.bbox[l].min[a], c.bbox[l].min[a])
				t.bbox[l].max[a] = max(t.bbox[l].max[a], c.bbox[l].max[a])
			}
		}
		n := int32(0)
		for _, ids := range [][]int32{c.firstID, c.lastID} {
			for _, id := range ids {
				n = max(n, id+1)
			}
		}
		offset[k+1] = offset[k] + n
	}
	uf := make(unionFind, offset[len(cs)])
	for i := range uf {
		uf[i] = int32(i)
	}
	for k := 0; k+1 < len(cs); k++ {
		a, b := cs[k], cs[k+1]
		ny := len(b.first.row) - 1
		for y := range ny {
			for ya := max(y-1, 0); ya <= min(y+1, ny-1); ya++ {
				touching(b.first, y, a.last, ya, func(i, j int32) {
					if uf.union(offset[k+1]+b.firstID[i], offset[k]+a.lastID[j]) {
						comps[lut[b.first.val[i]]]--
					}
				})
			}
		}
	}
	for l := range nl {
		t.components[l] = int(comps[l])
	}
	return t
}
