/*
 * idemkit Layer 2: claim / lease / fence protocol for ONE effect identity.
 *
 * Checked by model/check.sh with spin (exhaustive safety search). The safety
 * property is "at most one external effect per identity": the provider
 * counts the effects it performs and `assert(performed <= 1)` fires on a
 * second one.
 *
 * What the model contains:
 *   - REGIONS replicas of the effects-table item (a DynamoDB global table,
 *     MREC): the claim is an insert-if-absent checked ONLY against the local
 *     replica; the lease reclaim is a compare-and-set on (state, owner,
 *     expiry) against the local replica; completion and release are
 *     conditional on the owner. Replicas converge through per-direction
 *     replicators that apply last-writer-wins on (timestamp, region) with
 *     arbitrary lag, and stop entirely while the partition switch is on.
 *   - A global clock that ticks up to MAXT, and per-executor clock skew of
 *     -1, 0 or +1 tick: a lease's expiry is judged on the claimer's and the
 *     reclaimer's skewed local clocks, so a stalled-but-alive owner and a
 *     reclaimer can both believe they own the lease.
 *   - Executor crashes: every executor may stop forever after any step
 *     (including between the point-of-no-return write and the fire), and
 *     further executors (attempts) in either region run concurrently.
 *   - FENCED: the linearizable owner, a fence item in the home region (or an
 *     MRSC table). Before firing, an executor takes a monotonically
 *     increasing token (conditional UpdateItem: refused once the effect has
 *     passed its point of no return), then appends the point-of-no-return
 *     write conditional on "token is still the newest AND nothing passed the
 *     point of no return", immediately before the fire. A stale token is
 *     rejected (stale_fence_rejections counter). A non-home region cannot
 *     reach the fence while partitioned; any fence call may also apply and
 *     lose its response (timeout), in which case the executor must not fire.
 *
 * Variants (compile-time macros; model/check.sh runs each one):
 *   -DFENCED                  fenced-effects, 2 regions         -> must PASS
 *   -DFENCED -DREGIONS=1      fenced, single region             -> must PASS
 *   -DDEDUP                   reconciled-records, provider
 *                             deduplicates on the stable key    -> must PASS
 *   -DFENCED -DBROKEN_PONR    the point-of-no-return write does
 *                             not check the token (no fence
 *                             check)                            -> must FAIL
 *   (no macro)                reconciled-records, unfenced fire,
 *                             non-deduplicating provider        -> must FAIL
 *   -DREGIONS=1               single region, lease only, no
 *                             fence, non-deduplicating provider -> must FAIL
 *
 * Non-vacuity (the correct model is not safe merely because nothing can
 * happen): with -DREACH_STALE a stale-token rejection, and with
 * -DREACH_FIRE_REMOTE a fire from the non-home region, must be reachable
 * (the verifier must report the assertion those macros add).
 */

#ifndef REGIONS
#define REGIONS 2
#endif
#define HOME 0

#define L    2   /* lease length in ticks */
#define MAXT 3   /* the clock stops here (bounds the state space; L + 1) */

#define NONE      0
#define CLAIMED   1
#define COMPLETED 2
#define RELEASED  3

typedef Rec {
	byte state;
	byte owner;  /* executor id; 0 = none */
	byte exp;    /* lease expiry, in the writer's local clock */
	byte ts;     /* last-writer-wins timestamp (global clock at write) */
	byte wr;     /* region that wrote it: the LWW tie-breaker */
};

Rec led[REGIONS];     /* the effects-table item, one replica per region */
byte now = 0;         /* global time */
bool partitioned = false;

/* The fence item (home region, linearizable). */
byte ftoken = 0;      /* highest token issued */
byte fpassed = 0;     /* token that passed the point of no return; 0 = none */
bool stale = false;   /* a stale token was rejected (stale_fence_rejections_total moved) */

/* The provider. */
byte performed = 0;   /* effects actually performed */
bool seenKey = false; /* DEDUP: the provider remembers the stable key */
bool conflict = false; /* a replicator overwrote another owner's claim (audit) */

#define WRITE(r, st, who, e) \
	led[r].state = st; led[r].owner = who; led[r].exp = e; \
	led[r].ts = now; led[r].wr = r

/* A crash: the executor stops forever after this step. */
#define CRASH if :: skip :: goto done fi

proctype Exec(byte id; byte r)
{
	byte skew;    /* local clock = now + skew - 1 (kept >= 0 by the +1 shift) */
	byte mytok = 0;

	/* 1. Claim in the LOCAL replica: insert-if-absent, or reclaim an
	 *    expired lease by compare-and-set. Completed: the duplicate gets
	 *    the recorded outcome and fires nothing. Live claim: in flight. */
	atomic {
		if             /* this executor's clock skew: -1, 0 or +1 tick */
		:: skew = 0
		:: skew = 1
		:: skew = 2
		fi;
		if
		:: led[r].state == NONE || led[r].state == RELEASED ->
			WRITE(r, CLAIMED, id, now + skew + L)
		:: led[r].state == CLAIMED && now + skew >= led[r].exp ->
			WRITE(r, CLAIMED, id, now + skew + L)
		:: else -> goto done
		fi;
		skew = 0   /* the local clock is read only here: forget it */
	}
	CRASH;

#ifdef FENCED
	/* 2. Take a fencing token: conditional UpdateItem on the fence item,
	 *    refused once the effect passed its point of no return. */
	atomic {
		if
		:: r != HOME && partitioned -> goto release   /* unreachable */
		:: fpassed != 0 -> goto done                  /* already issued elsewhere */
		:: fpassed == 0 -> ftoken++; mytok = ftoken
		:: fpassed == 0 -> ftoken++; goto release      /* applied, response lost */
		fi
	}
	CRASH;

	/* 3. The point-of-no-return write, conditional on the token, appended
	 *    after the fence verdict and immediately before the fire. */
	atomic {
		if
		:: r != HOME && partitioned -> goto done       /* outcome unknown: do not fire */
#ifdef BROKEN_PONR
		:: true -> fpassed = mytok
#else
		:: ftoken == mytok && fpassed == 0 -> fpassed = mytok
		:: ftoken == mytok && fpassed == 0 -> fpassed = mytok; goto done /* response lost */
		:: else -> stale = true;
#ifdef REACH_STALE
			assert(false);  /* non-vacuity: a stale token is rejected */
#endif
			goto release
#endif
		fi
	}
	CRASH;
#endif

	/* 4. Fire: the external effect, with the stable provider key. */
	atomic {
#ifdef DEDUP
		if
		:: !seenKey -> seenKey = true; performed++
		:: else -> skip
		fi;
#else
		performed++;
#endif
		assert(performed <= 1);
#ifdef REACH_FIRE_REMOTE
		assert(r == HOME);    /* non-vacuity: a non-home region fires */
#endif
	}
	CRASH;

	/* 5. Record the outcome: conditional on still being the owner. */
	atomic {
		if
		:: led[r].state == CLAIMED && led[r].owner == id ->
			WRITE(r, COMPLETED, id, 0)
		:: else -> skip
		fi
	}
	goto done;

release:
	atomic {
		if
		:: led[r].state == CLAIMED && led[r].owner == id ->
			WRITE(r, RELEASED, 0, 0)
		:: else -> skip
		fi
	}
done:
	skip
}

/* Stream replication from one region to another: last writer wins on
 * (ts, wr), arbitrary lag, nothing crosses while partitioned. A newer record
 * from another owner over a live claim is a conflict the auditor records. */
proctype Rep(byte from; byte to)
{
end:
	do
	:: atomic {
		!partitioned &&
		(led[from].ts > led[to].ts ||
		 (led[from].ts == led[to].ts && led[from].wr > led[to].wr)) &&
		(led[from].state != led[to].state || led[from].owner != led[to].owner) ->
		if
		:: led[to].state != NONE && led[from].owner != 0 && led[to].owner != 0 &&
		   led[from].owner != led[to].owner -> conflict = true
		:: else -> skip
		fi;
		led[to].state = led[from].state;
		led[to].owner = led[from].owner;
		led[to].exp = led[from].exp;
		led[to].ts = led[from].ts;
		led[to].wr = led[from].wr
	   }
	od
}

proctype Clock()
{
end:
	do
	:: atomic { now < MAXT -> now++ }
	od
}

/* The partition switch: it may go on once and heal once, at any point. */
proctype Partition()
{
	if
	:: partitioned = true;
		if
		:: partitioned = false
		:: skip
		fi
	:: skip
	fi
}

init {
	atomic {
		run Clock();
		run Exec(1, 0);
		run Exec(2, REGIONS - 1);
		run Exec(3, 0);
#if REGIONS > 1
		run Rep(0, 1);
		run Rep(1, 0);
		run Partition();
#endif
	}
}
