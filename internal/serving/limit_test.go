package serving

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimit: bodies declared over the cap are refused with 413 unread;
// undeclared ones take the whole cap; the bytes in flight never exceed the
// budget, yet small requests run together; a caller that gives up waiting
// gets 503.
func TestLimit(t *testing.T) {
	const maxBody, budget = 100, 250
	var inFlight, most, calls atomic.Int64
	release := make(chan struct{})
	handler := Limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		n := r.ContentLength
		if n < 0 {
			n = maxBody
		}
		now := inFlight.Add(n)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		if r.Header.Get("Hold") != "" {
			<-release
		}
		inFlight.Add(-n)
		body, err := ReadBody(http.MaxBytesReader(w, r.Body, maxBody), "a test body")
		if err != nil {
			http.Error(w, err.Error(), Status(err))
			return
		}
		_, _ = w.Write(body)
	}), budget, maxBody)

	post := func(ctx context.Context, body io.Reader, length int64, hold bool) int {
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", body)
		req.ContentLength = length
		if hold {
			req.Header.Set("Hold", "1")
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}

	// Declared too large: refused, the handler never called.
	if code := post(context.Background(), strings.NewReader(strings.Repeat("x", 101)), 101, false); code != http.StatusRequestEntityTooLarge || calls.Load() != 0 {
		t.Errorf("101 bytes declared: %d after %d calls, want 413 before any", code, calls.Load())
	}
	// Undeclared and too large: read up to the cap, then 413.
	if code := post(context.Background(), io.MultiReader(strings.NewReader(strings.Repeat("x", 500))), -1, false); code != http.StatusRequestEntityTooLarge {
		t.Errorf("500 bytes undeclared: %d, want 413", code)
	}

	// 25 requests of 10 bytes held at once fit the budget together; the
	// 26th waits until one ends.
	var wg sync.WaitGroup
	codes := make(chan int, 30)
	for range 25 {
		wg.Go(func() { codes <- post(context.Background(), bytes.NewReader(make([]byte, 10)), 10, true) })
	}
	waitFor(t, func() bool { return inFlight.Load() == 250 })
	late := make(chan int, 1)
	go func() { late <- post(context.Background(), bytes.NewReader(make([]byte, 10)), 10, false) }()
	select {
	case code := <-late:
		t.Fatalf("a request over the budget ran at once (%d)", code)
	case <-time.After(50 * time.Millisecond):
	}
	// One that gives up waiting is answered 503.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if code := post(ctx, bytes.NewReader(make([]byte, 100)), 100, false); code != http.StatusServiceUnavailable {
		t.Errorf("a caller that gave up: %d, want 503", code)
	}
	close(release)
	wg.Wait()
	if code := <-late; code != http.StatusOK {
		t.Errorf("the request that waited: %d, want 200", code)
	}
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a held request: %d, want 200", code)
		}
	}
	if most.Load() > budget {
		t.Errorf("%d bytes in flight at once, over the budget of %d", most.Load(), budget)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
