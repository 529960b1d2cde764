package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrListen wraps Serve's failure to listen on its address (a usage error for the CLI); the
// cause (syscall.EADDRINUSE, a bad port...) is wrapped too.
var ErrListen = errors.New("metrics: cannot listen")

// stopTimeout bounds how long stop waits for scrapes in progress.
const stopTimeout = 5 * time.Second

// NewRegistry returns a registry with the Go runtime's and the process's collectors, for New and
// Serve.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Serve listens on addr (host:port; ":0" picks a port, which the log's "metrics listening" line
// names) and serves GET /metrics (g's metrics, Prometheus text or protobuf as asked) and GET
// /healthz ("ok") until ctx is done or stop is called. It returns once listening: an addr that
// cannot be listened on is an error wrapping ErrListen, and nothing is left running. stop shuts
// the server down, waiting up to 5 s for scrapes in progress, and may be called more than once
// (each returns the same error). log may be nil.
func Serve(ctx context.Context, addr string, g prometheus.Gatherer, log *slog.Logger) (stop func() error, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w on %q: %w", ErrListen, addr, err)
	}
	errLog := slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{
		ErrorLog:      errLog,
		ErrorHandling: promhttp.ContinueOnError, // a failing collector leaves out its metrics, not all
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	bound := ln.Addr().String()
	log.Info("metrics listening", "addr", bound, "paths", "/metrics /healthz")

	var once sync.Once
	var stopErr error
	stopped := make(chan struct{})
	stop = func() error {
		once.Do(func() {
			close(stopped)
			sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			err := srv.Shutdown(sctx)
			if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
				err = errors.Join(err, serr)
			}
			if err != nil {
				stopErr = fmt.Errorf("metrics: stop the server on %s: %w", bound, err)
			}
		})
		return stopErr
	}
	go func() {
		select {
		case <-ctx.Done():
			if err := stop(); err != nil {
				log.Warn("metrics server", "err", err)
			}
		case <-stopped:
		}
	}()
	return stop, nil
}
