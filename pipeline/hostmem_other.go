//go:build !unix

package pipeline

import (
	"voxpipe/engine"
)

// defaultAllocator nil: ordinary Go memory.
var defaultAllocator engine.HostAllocator
