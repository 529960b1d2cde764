package main

// info's values: the range of a volume's values and, for a label map, each label's voxel count.

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"voxpipe/io/nifti"
)

// printInfoValues reads volume t of the (valid) file and prints its value range and, for a label
// map, each label's voxel count.
func printInfoValues(field func(string, string, ...any), more func(string, ...any), path string, t int) error {
	r, err := nifti.Open(path, nifti.WithVolume(t))
	if err != nil {
		return err
	}
	defer r.Close()
	dt := r.Datatype()
	elem := dt.Size()
	plane := r.SliceVoxels()
	slab := max(1, min(16, (4<<20)/(plane*elem)))
	buf := make([]byte, plane*slab*elem)
	slope, inter := r.Scaling()
	integer := dt != nifti.Float32 && dt != nifti.Float64
	var counts infoLabelCounter
	lo, hi := math.Inf(1), math.Inf(-1)
	var sum float64
	var n, nans int64
	for {
		k, err := r.ReadSlicesRaw(buf, slab)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		raw := buf[:k*plane*elem]
		for i := 0; i < len(raw); i += elem {
			v, iv := infoSample(raw[i:], dt)
			if integer {
				counts.add(iv)
			}
			x := v*slope + inter
			if math.IsNaN(x) {
				nans++
				continue
			}
			lo, hi = math.Min(lo, x), math.Max(hi, x)
			sum += x
			n++
		}
	}
	of := ""
	if vols := r.Header().Volumes(); vols > 1 {
		of = fmt.Sprintf(" of volume %d (of %d)", t, vols)
	}
	nan := ""
	if nans > 0 {
		nan = fmt.Sprintf(", %d NaN", nans)
	}
	if n > 0 {
		field("values", "min %g, max %g, mean %g (%d voxels%s, scaled)%s", lo, hi, sum/float64(n), n, nan, of)
	} else {
		field("values", "no numbers (%d voxels%s)%s", nans, nan, of)
	}
	if labels := counts.labels(); integer && labels != nil {
		total := n + nans
		stored := ""
		if slope != 1 || inter != 0 {
			stored = ", stored values before scaling"
		}
		plural := "s"
		if len(labels) == 1 {
			plural = ""
		}
		field("labels", "%d distinct value%s%s", len(labels), plural, stored)
		for _, l := range labels {
			more("%6d: %d voxels (%.2f%%)", l.value, l.count, 100*float64(l.count)/float64(total))
		}
	}
	return nil
}

// infoSample decodes the host-order sample at the start of b, as a float and, for integer
// datatypes, exactly.
func infoSample(b []byte, dt nifti.DataType) (float64, int64) {
	e := binary.NativeEndian
	var i int64
	switch dt {
	case nifti.Uint8:
		i = int64(b[0])
	case nifti.Int8:
		i = int64(int8(b[0]))
	case nifti.Int16:
		i = int64(int16(e.Uint16(b)))
	case nifti.Uint16:
		i = int64(e.Uint16(b))
	case nifti.Int32:
		i = int64(int32(e.Uint32(b)))
	case nifti.Uint32:
		i = int64(e.Uint32(b))
	case nifti.Float32:
		return float64(math.Float32frombits(e.Uint32(b))), 0
	case nifti.Float64:
		return math.Float64frombits(e.Uint64(b)), 0
	}
	return float64(i), i
}

// infoLabelCounter counts the voxels of each value while there are at most infoMaxLabels of them.
// Label maps come in runs of one value: a run is counted, then added to the map once.
type infoLabelCounter struct {
	counts      map[int64]int64
	over        bool // more than infoMaxLabels distinct values: not a label map
	run, runLen int64
}

func (c *infoLabelCounter) add(v int64) {
	switch {
	case c.over:
		return
	case c.runLen > 0 && v == c.run:
		c.runLen++
		return
	}
	c.flush()
	if _, ok := c.counts[v]; !ok && len(c.counts) == infoMaxLabels {
		c.over, c.counts = true, nil
		return
	}
	c.run, c.runLen = v, 1
}

// flush adds the current run to its value's count.
func (c *infoLabelCounter) flush() {
	if c.runLen == 0 {
		return
	}
	if c.counts == nil {
		c.counts = map[int64]int64{}
	}
	c.counts[c.run] += c.runLen
	c.runLen = 0
}

type infoLabelCount struct{ value, count int64 }

// labels returns the counts by value, or nil when there were more than infoMaxLabels values (or
// none).
func (c *infoLabelCounter) labels() []infoLabelCount {
	if c.over {
		return nil
	}
	c.flush()
	if len(c.counts) == 0 {
		return nil
	}
	out := make([]infoLabelCount, 0, len(c.counts))
	for v, n := range c.counts {
		out = append(out, infoLabelCount{v, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].value < out[j].value })
	return out
}
