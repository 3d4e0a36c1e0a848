package serving

import (
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/sync/semaphore"
)

// Limit bounds what a handler's requests may hold in memory together: each
// takes a share of budget equal to its body's size (its Content-Length, or
// maxBody when it does not say) and waits for it while others hold theirs,
// so many small requests run at once and the largest run a few at a time. A
// body declared larger than maxBody is refused with 413 before it is read;
// the handler stops one that turns out larger at maxBody itself
// (http.MaxBytesReader). A request that gives up waiting (its caller's
// timeout) is answered 503.
//
// The servers' memory is then about budget times what a handler makes of
// a body (decoding it), over what the process holds anyway: budget is
// chosen from the memory limit the chart ships.
func Limit(next http.Handler, budget, maxBody int64) http.Handler {
	if budget < maxBody {
		panic(fmt.Sprintf("serving.Limit: a budget of %d bytes cannot hold one body of %d", budget, maxBody))
	}
	slots := semaphore.NewWeighted(budget)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			http.Error(w, fmt.Sprintf("request body of %d bytes: larger than the %d this server reads", r.ContentLength, maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		share := maxBody
		if r.ContentLength >= 0 {
			share = max(r.ContentLength, 1)
		}
		if err := slots.Acquire(r.Context(), share); err != nil {
			http.Error(w, "busy: the request's caller gave up waiting for memory to read it", http.StatusServiceUnavailable)
			return
		}
		defer slots.Release(share)
		next.ServeHTTP(w, r)
	})
}

// TooLargeError is a request body over its handler's cap.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("request body larger than %d bytes", e.Limit)
}

// Status is the HTTP status that answers a request whose body could not be
// read or decoded: 413 for one over the cap, 400 for the others.
func Status(err error) int {
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}
