// Package gzbomb makes gzip "bombs" for tests: small files that inflate to far more than they
// hold, with a consistent trailer (the CRC-32 of everything and ISIZE modulo 2^32), in
// milliseconds whatever the inflated size.
package gzbomb

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"

	"voxpipe/internal/crc32x"
)

// ZerosCRC is the CRC-32 of n zero bytes, by doubling.
func ZerosCRC(n int64) uint32 {
	var crc uint32 // of the zeros counted so far (none: 0)
	unit, m := crc32.ChecksumIEEE([]byte{0}), int64(1)
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			crc = crc32x.Combine(crc, unit, m)
		}
		unit = crc32x.Combine(unit, unit, m)
		m *= 2
	}
	return crc
}

// zeroMiB is the deflate data of 1 MiB of zeros from a fresh compressor, ended by a flush: a
// byte-aligned run of non-final blocks that refers only to its own output, so copies of it
// may follow any output (about 1 KiB each).
var zeroMiB = func() []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, 6)
	w.Write(make([]byte, 1<<20))
	w.Flush()
	return b.Bytes()
}()

// Zeros is a gzip file of prefix followed by mib MiB of zeros, with a consistent trailer. With
// mib a multiple of 4096, ISIZE is len(prefix), though the stream inflates to mib MiB more.
func Zeros(prefix []byte, mib int) []byte {
	b := bytes.NewBuffer([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255})
	w, _ := flate.NewWriter(b, 6)
	w.Write(prefix)
	w.Flush()
	for range mib {
		b.Write(zeroMiB)
	}
	b.Write([]byte{3, 0}) // a final, empty block (fixed Huffman)
	zeros := int64(mib) << 20
	crc := crc32x.Combine(crc32.ChecksumIEEE(prefix), ZerosCRC(zeros), zeros)
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(b.Bytes(), crc), uint32(int64(len(prefix))+zeros))
}
