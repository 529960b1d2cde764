// Package inflate decompresses a whole gzip file on several cores.
//
// A deflate stream cannot be cut at byte offsets: its blocks start at arbitrary bit positions
// and refer back up to 32 KiB into the output before them. Gunzip follows the approach of
// rapidgzip (Knespel and Brunst, 2023): the compressed data is cut into chunks; for each chunk a
// worker finds the first position that looks like the header of a dynamic-Huffman block and
// decodes from there without knowing the 32 KiB before it, writing stand-ins (markers) for the
// bytes it refers to; the chunks are then stitched in order. A chunk is used only if the
// decoding of the data before it ends exactly where it starts, which makes its decoding the true
// one; otherwise (a false positive, a chunk with no dynamic block) the stream is decoded on in
// order through it. A chunk's decoding goes over from markers to plain bytes as soon as its last
// 32 KiB hold no marker (no later back-reference can reach one: on volume-like data, after a
// few hundred KiB of output); once the 32 KiB before a chunk are known, its markers are
// replaced and its bytes copied, in parallel. The result is checked against the gzip trailer (CRC-32 and
// length) before Gunzip returns without error, so a mistake in the stitching cannot go
// unnoticed.
package inflate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"runtime/debug"
)

var (
	// ErrCorrupt: the data is not a valid gzip file.
	ErrCorrupt = errors.New("inflate: corrupt gzip data")
	// ErrUnsupported: a valid gzip file this package does not handle (several members, or a
	// size other than the caller expects); read it with compress/gzip instead.
	ErrUnsupported = errors.New("inflate: unsupported gzip layout")
	// ErrFault: reading src faulted, as a memory-mapped file does where another process has cut
	// it short meanwhile.
	ErrFault = errors.New("inflate: the compressed data could not be read (a mapped file cut short?)")
)

// faultErr is ErrFault, with the address, when r (a recovered panic) is a memory fault that
// debug.SetPanicOnFault turned into a panic; nil for any other panic.
func faultErr(r any) error {
	if f, ok := r.(interface {
		runtime.Error
		Addr() uintptr
	}); ok {
		return fmt.Errorf("%w: fault at %#x", ErrFault, f.Addr())
	}
	return nil
}

// Tuning, variables for tests.
var (
	// minChunk is the least compressed bytes per chunk (smaller chunks cost more in finding
	// block starts than they save); maxChunk the most (chunks in flight hold their output
	// until stitched).
	minChunk = 1 << 20
	maxChunk = 2 << 20
	// maxOvershoot is how far past its end a chunk's last block may run before the chunk is
	// given up (the data there is then decoded in order); real encoders' blocks are far smaller.
	maxOvershoot int64 = 4 << 20
)

// Gunzip decompresses src, a whole gzip file of one member, into dst, whose length must be the
// uncompressed size (the trailer's ISIZE, modulo 2^32, is checked against it), using up to
// threads goroutines. dst is filled only if Gunzip returns nil. A stream that inflates to more
// than len(dst) (its ISIZE agreeing modulo 2^32) is refused with ErrCorrupt having inflated
// and held no more than about len(dst) and 1.25 MiB per chunk in flight, whatever its size.
func Gunzip(src, dst []byte, threads int) error {
	return GunzipContext(context.Background(), src, dst, threads)
}

// GunzipContext is Gunzip that stops, with the context's cause, soon after ctx is done (each
// goroutine finishes the chunk it is decoding, a few MiB).
//
// src may be a memory-mapped file: a fault reading it, where another process has cut the file
// short, makes Gunzip and GunzipContext return ErrFault instead of crashing (the goroutines
// that read src run with debug.SetPanicOnFault).
func GunzipContext(ctx context.Context, src, dst []byte, threads int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if err = faultErr(r); err == nil {
				panic(r)
			}
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	start, err := headerLen(src)
	if err != nil {
		return err
	}
	if len(src)-start < 8 {
		return fmt.Errorf("%w: no room for the trailer", ErrCorrupt)
	}
	body := src[start : len(src)-8]
	wantCRC := binary.LittleEndian.Uint32(src[len(src)-8:])
	if isize := binary.LittleEndian.Uint32(src[len(src)-4:]); isize != uint32(len(dst)) {
		return fmt.Errorf("%w: the trailer gives %d bytes (mod 2^32), the caller expects %d", ErrUnsupported, isize, len(dst))
	}
	s := newStitcher(ctx, body, dst, max(1, threads))
	defer s.wait()
	if err := s.run(); err != nil {
		return err
	}
	s.wait() // the parallel resolutions, and with them the CRCs of their pieces
	if testHook != nil {
		testHook(s)
	}
	if s.err != nil {
		return s.err
	}
	if crc := s.crc(); crc != wantCRC {
		return fmt.Errorf("%w: CRC-32 %08x, the trailer says %08x", ErrCorrupt, crc, wantCRC)
	}
	return nil
}

// headerLen parses a gzip member header (RFC 1952) and returns its length.
func headerLen(src []byte) (int, error) {
	if len(src) < 10 || src[0] != 0x1f || src[1] != 0x8b {
		return 0, fmt.Errorf("%w: not gzip", ErrCorrupt)
	}
	if src[2] != 8 {
		return 0, fmt.Errorf("%w: compression method %d", ErrCorrupt, src[2])
	}
	flg := src[3]
	if flg&0xe0 != 0 {
		return 0, fmt.Errorf("%w: reserved header flags %#x", ErrCorrupt, flg)
	}
	p := 10
	if flg&4 != 0 { // FEXTRA
		if len(src) < p+2 {
			return 0, fmt.Errorf("%w: header truncated", ErrCorrupt)
		}
		p += 2 + int(binary.LittleEndian.Uint16(src[p:]))
	}
	for _, f := range []byte{8, 16} { // FNAME, FCOMMENT: zero-terminated
		if flg&f == 0 {
			continue
		}
		for p < len(src) && src[p] != 0 {
			p++
		}
		p++
	}
	if p > len(src) {
		return 0, fmt.Errorf("%w: header truncated", ErrCorrupt)
	}
	if flg&2 != 0 { // FHCRC: the low 16 bits of the header's CRC-32, checked as compress/gzip does
		if len(src) < p+2 {
			return 0, fmt.Errorf("%w: header truncated", ErrCorrupt)
		}
		if binary.LittleEndian.Uint16(src[p:]) != uint16(crc32.ChecksumIEEE(src[:p])) {
			return 0, fmt.Errorf("%w: header checksum mismatch", ErrCorrupt)
		}
		p += 2
	}
	return p, nil
}
