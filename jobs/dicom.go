package jobs

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"voxpipe/internal/regular"
	"voxpipe/io/dicom"
	"voxpipe/io/nifti"
	"voxpipe/store/provenance"
)

// DICOM inputs. A folder's files that are not NIfTI are read as DICOM, one job per series
// (io/dicom). The pipeline sees a series through the NIfTI header dcm2niix would give its
// volume (dicom.Series.Header): the same budget, geometry, mask header and provenance as a
// NIfTI input. What differs is here: discovery (dicomJobs), the fingerprint (Job.Stat: the
// series' files and UIDs) and the header (Job.Header); the read is the pipeline's.
// Jobs are named by series number and ID (a hash of the SeriesInstanceUID), and logs and
// records show the mask as the series ID (Job.ShownOutput): the mask's file name comes from
// --dicom-name, whose default (dicom.DefaultName) is that job name, no patient data.

// DICOMJobs makes one job per DICOM series found in files, as `voxpipe run` does for the DICOM
// files of its folders (dicomJobs): named series_<number>_<ID>, the mask under outDir named by
// maskName with {name} from the template dicomName (--dicom-name), Job.Err set for a series
// that cannot be read. Files that are not DICOM images are left out. The watch service
// (package inbox) calls it with the files of one settled series.
func DICOMJobs(files []string, outDir, maskName, dicomName string) ([]Job, error) {
	return dicomJobs(&Discovery{}, files, outDir, maskName, dicomName) // the inbox notes skipped files itself
}

// isDICOM reports whether the file at path, a regular file, parses as DICOM or is a DICOM
// file that fails to (anything but dicom.ErrNotDICOM). Other files are not opened.
func isDICOM(path string) bool {
	if _, err := regular.Check(path); err != nil {
		return false
	}
	_, err := dicom.ParseFile(path)
	return err == nil || !errors.Is(err, dicom.ErrNotDICOM)
}

// dicomJobs makes one job per series found in files; series that cannot be read (a member
// that cannot, see dicom.ScanFiles; their geometry) get Job.Err. Files that are not DICOM
// images are left out, listed in d.Skipped.
func dicomJobs(d *Discovery, files []string, outDir, maskName, dicomName string) ([]Job, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if err := dicom.CheckName(dicomName); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	scan := dicom.ScanFiles(files, 0)
	d.Skipped = append(d.Skipped, scan.Skipped...)
	var jobs []Job
	for i, name := range dicom.Names(scan.Series, dicomName) {
		s := scan.Series[i]
		job := Job{
			Name:   DICOMJobName(s),
			Input:  filepath.Dir(s.Files[0].Path),
			Output: filepath.Join(outDir, filepath.FromSlash(strings.ReplaceAll(maskName, "{name}", name))),
			Err:    s.Err,
			Series: s,
		}
		if s.Err == nil {
			job.Voxels = s.Voxels()
		} else {
			job.Err = fmt.Errorf("DICOM series %s (number %d) in %s: %w", s.ID(), s.Number, job.Input, s.Err)
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}

// DICOMJobName is a series' job name: its number and ID, no patient data.
func DICOMJobName(s *dicom.Series) string { return fmt.Sprintf("series_%d_%s", s.Number, s.ID()) }

// ShownOutput is the mask as logs and records show it: its path, or for a DICOM series (whose
// mask name may hold patient data) the series ID.
func (j Job) ShownOutput() string {
	if j.Series != nil {
		return "dicom series " + j.Series.ID()
	}
	return j.Output
}

// Stat fingerprints a job's input: its NIfTI file(s), or its series' files (in slice order)
// and UIDs.
func (job Job) Stat() (provenance.Input, []string, error) {
	s := job.Series
	if s == nil {
		return provenance.Stat(job.Input)
	}
	paths := make([]string, len(s.Files))
	for i, f := range s.Files {
		paths[i] = f.Path
	}
	in, files, err := provenance.StatFiles(paths)
	in.DICOM = &provenance.DICOMSeries{StudyInstanceUID: s.StudyUID, SeriesInstanceUID: s.UID, Part: s.Part}
	return in, files, err
}

// Header is the input's header: read from the NIfTI file, or the series' as dcm2niix would
// write it.
func (job Job) Header() (*nifti.Header, error) {
	if job.Series == nil {
		return nifti.ReadHeader(job.Input)
	}
	return job.Series.Header(job.Series.StoredType()), nil
}
