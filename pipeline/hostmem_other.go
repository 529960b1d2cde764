//go:build !unix

package pipeline

import "voxpipe/segment"

// defaultAllocator nil: ordinary Go memory.
var defaultAllocator segment.HostAllocator
