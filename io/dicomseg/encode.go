package dicomseg

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// tag is a data element tag, group in the high 16 bits.
type tag uint32

// encoder writes an Explicit VR Little Endian data set (PS3.5 7.1.2), sequences and items of
// undefined length, so that nothing has to be measured before it is written. The first write
// error sticks and every later call does nothing.
type encoder struct {
	w   *bufio.Writer
	err error
	le  [8]byte
}

// header writes a tag, its VR and the value length in the form the VR takes.
func (e *encoder) header(t tag, vr string, n uint32) {
	b := e.le[:]
	binary.LittleEndian.PutUint16(b[0:], uint16(t>>16))
	binary.LittleEndian.PutUint16(b[2:], uint16(t))
	b[4], b[5] = vr[0], vr[1]
	if longVR(vr) {
		e.write(b[:6])
		b[0], b[1] = 0, 0
		e.write(b[:2])
		binary.LittleEndian.PutUint32(b[0:], n)
		e.write(b[:4])
		return
	}
	binary.LittleEndian.PutUint16(b[6:], uint16(n))
	e.write(b[:8])
}

func (e *encoder) write(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

// str writes a text element, padded to even length (UI with a NUL, the others with a space).
// Callers keep values within their VR's length (ds, is, checked strings).
func (e *encoder) str(t tag, vr, v string) {
	n := len(v)
	pad := n%2 == 1
	if pad {
		n++
	}
	e.header(t, vr, uint32(n))
	if e.err == nil {
		_, e.err = e.w.WriteString(v)
	}
	if pad {
		if vr == "UI" {
			e.write([]byte{0})
		} else {
			e.write([]byte{' '})
		}
	}
}

// us writes a US element of one or more values.
func (e *encoder) us(t tag, vs ...uint16) {
	e.header(t, "US", uint32(2*len(vs)))
	for _, v := range vs {
		binary.LittleEndian.PutUint16(e.le[:], v)
		e.write(e.le[:2])
	}
}

// ul writes a UL element of one or more values.
func (e *encoder) ul(t tag, vs ...uint32) {
	e.header(t, "UL", uint32(4*len(vs)))
	for _, v := range vs {
		binary.LittleEndian.PutUint32(e.le[:], v)
		e.write(e.le[:4])
	}
}

// at writes an AT element: one attribute tag.
func (e *encoder) at(t, v tag) {
	e.header(t, "AT", 4)
	binary.LittleEndian.PutUint16(e.le[0:], uint16(v>>16))
	binary.LittleEndian.PutUint16(e.le[2:], uint16(v))
	e.write(e.le[:4])
}

// seq writes a sequence of undefined length whose items body writes, each between item and
// item delimitation.
func (e *encoder) seq(t tag, items int, body func(i int)) {
	e.header(t, "SQ", 0xFFFFFFFF)
	for i := range items {
		e.delim(0xFFFEE000, 0xFFFFFFFF)
		body(i)
		e.delim(0xFFFEE00D, 0)
	}
	e.delim(0xFFFEE0DD, 0)
}

// item1 writes a sequence of one item.
func (e *encoder) item1(t tag, body func()) { e.seq(t, 1, func(int) { body() }) }

// delim writes an item or delimitation tag with its length (no VR).
func (e *encoder) delim(t tag, n uint32) {
	binary.LittleEndian.PutUint16(e.le[0:], uint16(t>>16))
	binary.LittleEndian.PutUint16(e.le[2:], uint16(t))
	binary.LittleEndian.PutUint32(e.le[4:], n)
	e.write(e.le[:8])
}

// code writes a code sequence item's three attributes (PS3.3 8.8).
func (e *encoder) code(c Code) {
	e.str(0x00080100, "SH", c.Value)
	e.str(0x00080102, "SH", c.Scheme)
	e.str(0x00080104, "LO", c.Meaning)
}

// ds formats a Decimal String value within its 16 characters (PS3.5 6.2): the shortest form
// that round-trips when it fits, else the most significant digits that do.
func ds(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	s := strconv.FormatFloat(v, 'g', -1, 64)
	for p := 16; len(s) > 16 && p > 0; p-- {
		s = strconv.FormatFloat(v, 'g', p, 64)
	}
	return s
}

// dss is a multi-valued DS.
func dss(vs ...float64) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = ds(v)
	}
	return strings.Join(out, `\`)
}

// uid derives a UID under the 2.25 root from the parts (PS3.5 B.2): the first 16 bytes of
// their SHA-256 as a version-8 (name-based, custom hash) UUID, in decimal. The same parts
// always give the same UID.
func uid(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	b := h.Sum(nil)[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return "2.25." + new(big.Int).SetBytes(b).String()
}
