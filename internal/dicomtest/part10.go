package dicomtest

import (
	"bytes"
	"compress/flate"
)

// Part10 wraps a data set in the preamble and a meta group naming the SOP class and transfer
// syntax syntax, deflating the data set where deflate.
func Part10(syntax string, dataset []byte, deflate bool) []byte {
	return part10(metaGroup(syntax, "", false), dataset, deflate)
}

// metaGroup is the file meta group of syntax: the SOP class and the syntax, or, where full,
// its group length, version and SOP instance UID sop too.
func metaGroup(syntax, sop string, full bool) []byte {
	meta := NewEnc(ExplicitVRLittleEndian)
	if full {
		meta.Elem(0x00020001, "OB", []byte{0, 1})
	}
	meta.Str(0x00020002, "UI", MRImageStorage)
	if full {
		meta.Str(0x00020003, "UI", sop)
	}
	meta.Str(0x00020010, "UI", syntax)
	if !full {
		return meta.Bytes()
	}
	group := NewEnc(ExplicitVRLittleEndian).UL(0x00020000, uint32(meta.Len()))
	return append(group.Bytes(), meta.Bytes()...)
}

func part10(meta, dataset []byte, deflate bool) []byte {
	var out bytes.Buffer
	out.Write(make([]byte, 128))
	out.WriteString("DICM")
	out.Write(meta)
	if !deflate {
		out.Write(dataset)
		return out.Bytes()
	}
	w, _ := flate.NewWriter(&out, flate.BestCompression) // errors only for a bad level
	w.Write(dataset)
	w.Close()
	return out.Bytes()
}

// zeroMiB is the raw deflate data of 1 MiB of zeros from a fresh compressor, ended by a
// flush: byte-aligned non-final blocks that refer only to their own output, so that copies of
// it may follow any output (about 1 KiB each).
var zeroMiB = func() []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, 6)
	w.Write(make([]byte, 1<<20))
	w.Flush()
	return b.Bytes()
}()

// DeflatedBomb is a deflated Part 10 file whose data set inflates to head, mib MiB of zeros,
// then tail: one raw deflate stream, about mib KiB long.
func DeflatedBomb(head []byte, mib int, tail []byte) []byte {
	var b bytes.Buffer
	b.Write(Part10(DeflatedExplicitVRLE, nil, false))
	w, _ := flate.NewWriter(&b, 6)
	w.Write(head)
	w.Flush()
	for range mib {
		b.Write(zeroMiB)
	}
	w, _ = flate.NewWriter(&b, 6)
	w.Write(tail)
	w.Close()
	return b.Bytes()
}
