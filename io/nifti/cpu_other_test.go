//go:build !unix

package nifti

import "time"

func processCPU() time.Duration { return 0 }
