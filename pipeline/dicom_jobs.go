package pipeline

// DICOMJobs makes one job per DICOM series found in files, as `voxpipe run` does for the DICOM
// files of its folders (dicomJobs): named series_<number>_<ID>, the mask under outDir named by
// maskName with {name} from the template dicomName (--dicom-name), Job.Err set for a series
// that cannot be read. Files that are not DICOM images are left out. The watch service
// (pipeline/inbox) calls it with the files of one settled series.
func DICOMJobs(files []string, outDir, maskName, dicomName string) ([]Job, error) {
	return dicomJobs(&Discovery{}, files, outDir, maskName, dicomName) // the inbox notes skipped files itself
}
