package main

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"voxpipe/engine/engine"
	"voxpipe/engine/open"

	"github.com/urfave/cli/v2"

	"voxpipe/fixtures"
	"voxpipe/model"
	"voxpipe/store/provenance"
	"voxpipe/telemetry/timing"
)

// loadModel reads the weights file at path, or the embedded default model when path is empty,
// and returns it with a short name for logs and mask headers, and its identity (name and hash,
// for provenance) from the same bytes: the file is read once.
func loadModel(path string) (*model.Model, string, provenance.Model, error) {
	if path == "" {
		m, err := model.ParseModel(fixtures.DefaultModel)
		if err != nil {
			return nil, "", provenance.Model{}, fmt.Errorf("embedded default model: %w", err)
		}
		return m, fixtures.DefaultModelName, provenance.ModelOf(fixtures.DefaultModelName, fixtures.DefaultModel), nil
	}
	m, data, err := model.ReadModel(path)
	if err != nil {
		return nil, "", provenance.Model{}, err
	}
	name := filepath.Base(path)
	return m, name, provenance.ModelOf(name, data), nil
}

// engineFlags are the flags openModelAndEngines reads; devices is the --devices default.
func engineFlags(devices string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", DefaultText: "embedded", Usage: "weights file (.safetensors); default: the embedded model"},
		&cli.StringFlag{Name: "engine", Value: open.KindAuto, Usage: "auto, cpu or cuda (auto: CUDA when built with it and a GPU is present)"},
		&cli.StringFlag{Name: "devices", Value: devices, Usage: "GPUs for the cuda engine: all, or ordinals such as 0,1 (ordinals where no GPU engine runs are a usage error)"},
		&cli.StringFlag{Name: "precision", Value: engine.PrecisionFP16, Usage: "cuda engine arithmetic: fp16 (fused tensor-core kernel) or fp32 (float32 reference kernels)"},
		&cli.IntFlag{Name: "workers", Usage: "threads of the CPU engine (0: all cores)"},
	}
}

// openModelAndEngines loads --model and opens the engines of --engine, --devices, --workers and
// --precision; errors are usage errors (exit 2). Close the engines with closeEngines.
func openModelAndEngines(c *cli.Context) (*model.Model, string, provenance.Model, []engine.Engine, error) {
	mdl, name, id, err := loadModel(c.String("model"))
	if err != nil {
		return nil, "", id, nil, usageError{fmt.Errorf("--model: %w", err)}
	}
	engines, err := open.Engines(mdl, c.String("engine"), c.String("devices"), c.Int("workers"),
		engine.CUDAOptions{Precision: c.String("precision")})
	if err != nil {
		return nil, "", id, nil, usageError{fmt.Errorf("%s: %w", engineFlagOf(err), err)}
	}
	// GPUs asked for by name must not quietly become the CPU engine.
	if devices := c.String("devices"); c.IsSet("devices") && devices != open.AllDevices && !isCUDA(engines[0]) {
		closeEngines(engines)
		return nil, "", id, nil, usageError{fmt.Errorf("--devices %s: %w: the %s engine runs (no GPU present, this build has no CUDA, or --engine cpu)", devices, open.ErrDevices, engines[0].Name())}
	}
	return mdl, name, id, engines, nil
}

// checkEngineFlags checks engineFlags' values without opening anything (usage errors).
func checkEngineFlags(c *cli.Context, cmd string) error {
	if k := c.String("engine"); k != open.KindAuto && k != open.KindCPU && k != open.KindCUDA {
		return usageError{fmt.Errorf("%s: --engine must be %s, %s or %s, not %q", cmd, open.KindAuto, open.KindCPU, open.KindCUDA, k)}
	}
	if err := (engine.CUDAOptions{Precision: c.String("precision")}).Validate(); err != nil {
		return usageError{fmt.Errorf("%s: --precision: %w", cmd, err)}
	}
	if err := open.CheckDevices(c.String("devices")); err != nil {
		return usageError{fmt.Errorf("%s: --devices: %w", cmd, err)}
	}
	if w := c.Int("workers"); w < 0 {
		return usageError{fmt.Errorf("%s: --workers must be 0 (all cores) or more, not %d", cmd, w)}
	}
	return nil
}

// engineFlagOf names the flag an error of open.Engines is about.
func engineFlagOf(err error) string {
	switch {
	case errors.Is(err, open.ErrDevices):
		return "--devices"
	case errors.Is(err, open.ErrWorkers):
		return "--workers"
	case errors.Is(err, engine.ErrBadPrecision):
		return "--precision"
	}
	return "--engine"
}

func isCUDA(e engine.Engine) bool {
	kind, _, _ := strings.Cut(e.Name(), ":")
	return kind == open.KindCUDA
}

// noteKernels logs which compiled kernels each engine runs (the CUDA engine's kernel image) and
// adds it to the trace's metadata (tr may be nil). An engine that failed to open is left out:
// the run reports its error.
func noteKernels(engines []engine.Engine, log *slog.Logger, tr *timing.Trace) {
	for _, e := range engines {
		k, ok := e.(engine.KernelDescriber)
		if !ok {
			continue
		}
		desc, err := k.Kernels()
		if err != nil {
			continue
		}
		attrs := []any{"engine", e.Name(), "kernels", desc}
		if steps, err := k.OpenSteps(); err == nil {
			for _, s := range steps {
				attrs = append(attrs, "open_"+strings.ReplaceAll(s.Name, " ", "_")+"_ms", float64(s.Duration.Microseconds())/1000)
			}
		}
		log.Info("kernels", attrs...)
		if tr != nil {
			tr.Note(e.Name()+" kernels", desc)
		}
	}
}

func closeEngines(engines []engine.Engine) {
	for _, e := range engines {
		e.Close()
	}
}
