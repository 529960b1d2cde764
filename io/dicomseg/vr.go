package dicomseg

// longVR: the explicit VRs with two reserved bytes and a 32-bit length (PS3.5 7.1.2), for the
// writer and the reader.
func longVR(vr string) bool {
	switch vr {
	case "OB", "OD", "OF", "OL", "OV", "OW", "SQ", "UC", "UN", "UR", "UT", "SV", "UV":
		return true
	}
	return false
}
