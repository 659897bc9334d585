package idem

import (
	"context"
	"errors"
	"testing"
)

// TestLeaseCtxIsContextWithCancelCause: the handler's context behaves as
// context.WithCancelCause over context.WithValue would, whether or not the
// handler reads Done before it ends: the claim and decoded values (read
// without making anything), other values, the parent's cancellation and
// cause, the lease's end with its cause (the first one kept), and a
// derived context ending with it.
func TestLeaseCtxIsContextWithCancelCause(t *testing.T) {
	for _, doneFirst := range []bool{false, true} {
		name := "Err only"
		if doneFirst {
			name = "Done read first"
		}
		t.Run(name, func(t *testing.T) {
			setup := func(parent context.Context) (*leaseCtx, *claimState) {
				cs := &claimState{info: ClaimInfo{ID: "id", Attempt: 1}}
				lc := &leaseCtx{parent: &claimValues{Context: parent, claim: cs, decoded: "req"}}
				if doneFirst {
					lc.Done()
				}
				return lc, cs
			}
			t.Run("values, then the lease lost", func(t *testing.T) {
				lc, cs := setup(context.WithValue(context.Background(), ctxKey{}, "v"))
				if lc.Value(claimKey{}) != cs || lc.Value(decodedKey{}) != "req" {
					t.Fatal("the claim's values are lost")
				}
				if info, ok := FromContext(lc); !ok || info.ID != "id" {
					t.Fatalf("FromContext: %+v %v", info, ok)
				}
				if !doneFirst && lc.real != nil {
					t.Fatal("reading the claim made the cancellable context")
				}
				if lc.Err() != nil {
					t.Fatalf("live: Err %v", lc.Err())
				}
				if lc.Value(ctxKey{}) != "v" {
					t.Fatal("the parent's value is lost")
				}
				child, cancel := context.WithCancel(lc)
				defer cancel()
				lc.end(ErrLeaseLost)
				lc.end(nil) // the first cause stays
				<-lc.Done()
				<-child.Done()
				if !errors.Is(lc.Err(), context.Canceled) || !errors.Is(context.Cause(lc), ErrLeaseLost) || !errors.Is(context.Cause(child), ErrLeaseLost) {
					t.Fatalf("lease lost: Err %v, cause %v, child's cause %v", lc.Err(), context.Cause(lc), context.Cause(child))
				}
			})
			t.Run("ended before anything was read", func(t *testing.T) {
				lc, _ := setup(context.Background())
				lc.end(ErrLeaseLost)
				if !errors.Is(context.Cause(lc), ErrLeaseLost) || !errors.Is(lc.Err(), context.Canceled) {
					t.Fatalf("cause %v, Err %v", context.Cause(lc), lc.Err())
				}
				<-lc.Done()
			})
			t.Run("handler returned", func(t *testing.T) {
				lc, _ := setup(context.Background())
				lc.end(nil)
				<-lc.Done()
				if !errors.Is(lc.Err(), context.Canceled) || !errors.Is(context.Cause(lc), context.Canceled) {
					t.Fatalf("ended: Err %v, cause %v", lc.Err(), context.Cause(lc))
				}
			})
			t.Run("parent cancelled", func(t *testing.T) {
				cause := errors.New("client gone")
				parent, cancel := context.WithCancelCause(context.Background())
				lc, _ := setup(parent)
				if lc.Err() != nil || context.Cause(lc) != nil {
					t.Fatalf("live: Err %v, cause %v", lc.Err(), context.Cause(lc))
				}
				cancel(cause)
				if doneFirst {
					<-lc.Done()
				}
				if !errors.Is(lc.Err(), context.Canceled) || !errors.Is(context.Cause(lc), cause) {
					t.Fatalf("parent cancelled: Err %v, cause %v", lc.Err(), context.Cause(lc))
				}
				<-lc.Done()
				lc.end(ErrLeaseLost)
				if !errors.Is(context.Cause(lc), cause) {
					t.Fatalf("after the parent's cancellation the lease's end changed the cause to %v", context.Cause(lc))
				}
			})
		})
	}
}
