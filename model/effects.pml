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
 *     (including between the point-of-no-return write and the fire; covered
 *     by the prefixes the search explores, see CRASH), and
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
 *     The record carries the fence token of its last fire-marked attempt
 *     (written by the fire mark, between the token and the point of no
 *     return) and whether that attempt ended released, not sent.
 *   - FENCED reopening, as ledger/do.go and ledger/resolve.go do it:
 *     (a) an executor whose token is refused (or lost) and whose claimed
 *     record's last fire-marked attempt ended released, not sent (its
 *     point-of-no-return write failed or its answer was lost, so the
 *     provider was not called), reopens the fence for that attempt's token
 *     and takes a token once more; (b) an operator resolves an escaped
 *     effect (record firing) as not delivered: reopen the fence for the
 *     record's token first, then write the resolution conditional on the
 *     record read, a write that may lose a race (the fence stays reopened);
 *     once resolved, the operator may grant one more attempt to the
 *     released record while no attempt fire-marked it since (the attempts
 *     since never reached the provider): the fence is reopened for the same
 *     token again. A reopen (fence.Store.Reopen) forgets the pass if and
 *     only if that token passed, and retires the token (a late pass of it
 *     is refused) when it passed, or when nothing passed and it is the
 *     newest issued; a reopen of a superseded token with nothing passed
 *     changes nothing. The operator's resolution is truthful: the attempt
 *     holding that token did not call the provider, and either has stopped
 *     (ghost variables tfired and tdead) or runs on, stalled before its
 *     point-of-no-return write until after the reopen (ghost variables
 *     tpass and tstall): it wakes and tries to pass after the resolution.
 *     Either reopen may also be unreachable, or apply and lose its answer
 *     (the ledger then does not take a token; Resolve writes nothing).
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
 *   -DFENCED -DRESOLVE        fenced, 2 regions, with an operator
 *                             resolving as not delivered        -> must PASS
 *   -DFENCED -DRESOLVE -DREGIONS=1                              -> must PASS
 *   -DFENCED -DBROKEN_NOTSENT_LIES   the function reports not sent
 *                             after its call left               -> must FAIL
 *   -DFENCED -DBROKEN_REOPEN_ANY     reopen forgets whichever token
 *                             passed (no condition on the
 *                             attempt's own token)              -> must FAIL
 *   -DFENCED -DBROKEN_REOPEN_ESCAPED the ledger reopens for the last
 *                             fire-marked attempt whatever its
 *                             end (escaped too)                 -> must FAIL
 *   -DFENCED -DBROKEN_REOPEN_RESETS  reopen deletes the fence item,
 *                             so token numbers are issued again -> must FAIL
 *   -DFENCED -DRESOLVE -DBROKEN_REOPEN_KEEPS_UNPASSED  reopen changes
 *                             nothing when nothing passed (the
 *                             newest token stays passable), so an
 *                             attempt stalled before its pass
 *                             passes after the resolution       -> must FAIL
 *   -DFENCED -DRESOLVE -DBROKEN_RESOLVE_LIES  the operator resolves
 *                             as not delivered an attempt that
 *                             called the provider               -> must FAIL
 *   -DFENCED -DRESOLVE -DBROKEN_RESOLVE_ALIVE the operator resolves
 *                             an attempt that has not called the
 *                             provider yet but is still running -> must FAIL
 *
 * Non-vacuity (the correct model is not safe merely because nothing can
 * happen): with -DREACH_STALE a stale-token rejection, and with
 * -DREACH_FIRE_REMOTE a fire from the non-home region, with
 * -DREACH_UNSENT_FIRE a fire after an executor reopened the fence, with
 * -DRESOLVE -DREACH_RESOLVE_FIRE a fire after the operator reopened it, and
 * with -DRESOLVE -DREACH_RESOLVE_LOST_FIRE such a fire when the operator's
 * record write then lost its race, and with -DRESOLVE -DREACH_LATE_PASS the
 * refusal of the late pass of an attempt the operator resolved while it was
 * stalled before its pass, must be reachable (the verifier must report the
 * assertion those macros add).
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
#define FIRING    4   /* fire-marked (FENCED): the point of no return is next */

/* Tokens issued: at most 2 per executor and 3 executors, plus the tokens
 * reopens retire (one per executor, two by the operator). */
#define MAXTOK 12

typedef Rec {
	byte state;
	byte owner;  /* executor id; 0 = none */
	byte exp;    /* lease expiry, in the writer's local clock */
	byte ts;     /* last-writer-wins timestamp (global clock at write) */
	byte wr;     /* region that wrote it: the LWW tie-breaker */
	byte fence;  /* token of the last fire-marked attempt; 0 = none */
	bool unsent; /* that attempt ended released, not sent */
};

Rec led[REGIONS];     /* the effects-table item, one replica per region */
byte now = 0;         /* global time */
bool partitioned = false;

/* The fence item (home region, linearizable). */
byte ftoken = 0;      /* highest token issued */
byte fpassed = 0;     /* token that passed the point of no return; 0 = none */
bool stale = false;   /* a stale token was rejected (stale_fence_rejections_total moved) */

/* Ghosts (not part of the protocol), kept only where a variant reads them
 * (each one multiplies the states): what the holder of each token did, for
 * the operator's truthful resolution; who reopened, for non-vacuity. */
#ifdef RESOLVE
bool tfired[MAXTOK];  /* its holder called the provider */
bool tdead[MAXTOK];   /* its holder stopped: it never calls the provider */
bool tpass[MAXTOK];   /* its holder made its point-of-no-return write (any outcome) */
byte tstall = 0;      /* the operator is resolving this token's attempt, stalled
                       * before its pass: the pass waits until after the reopen */
#define FIRED(t) tfired[t] = true
#else
#define FIRED(t) skip
#endif
#ifdef REACH_LATE_PASS
byte late = 0;        /* the token resolved while its attempt was stalled before its pass */
#define LATE(t) late = t
#else
#define LATE(t) skip
#endif
#if defined(REACH_UNSENT_FIRE) || defined(REACH_RESOLVE_FIRE) || defined(REACH_RESOLVE_LOST_FIRE)
byte reopened = 0;    /* 1: an executor, 2: the operator forgot a pass */
#define REOPENED(who) reopened = who
#else
#define REOPENED(who) skip
#endif
#ifdef REACH_RESOLVE_LOST_FIRE
bool rlost = false;   /* the operator's record write lost its race */
#define RLOST rlost = true
#else
#define RLOST skip
#endif

/* The provider. */
byte performed = 0;   /* effects actually performed */
bool seenKey = false; /* DEDUP: the provider remembers the stable key */
bool conflict = false; /* a replicator overwrote another owner's claim (audit) */

#define WRITE(r, st, who, e) \
	led[r].state = st; led[r].owner = who; led[r].exp = e; \
	led[r].ts = now; led[r].wr = r

/* A crash: the executor stops forever after this step. It needs no
 * transition of its own: the property is an assertion, so a violation is a
 * finite prefix of an execution, and a prefix in which an executor crashed
 * after step k is the same prefix in which it merely has not run step k+1
 * yet (no guard reads another executor's control state, and there is no
 * timeout). The verifier explores every such prefix, so crashes after
 * every step are covered without the branches that would multiply the
 * states. The operator's "the attempt stopped" is modelled by Resolve
 * stopping that attempt (tdead), see Op. */
#define CRASH skip

proctype Exec(byte id; byte r)
{
	byte skew;    /* local clock = now + skew - 1 (kept >= 0 by the +1 shift) */
	byte mytok = 0;
#ifdef FENCED
	byte rfence = 0;      /* the claimed record's token (rec.Fence) */
	bool runsent = false; /* its last fire-marked attempt ended not sent */
	bool retried = false; /* the token was taken again after a reopen */
#endif

	/* 1. Claim in the LOCAL replica: insert-if-absent, or reclaim an
	 *    expired lease by compare-and-set. Completed: the duplicate gets
	 *    the recorded outcome and fires nothing. Live claim: in flight.
	 *    The claim keeps the record's token and not-sent mark. */
	atomic {
		if             /* this executor's clock skew: -1, 0 or +1 tick */
		:: skew = 0
		:: skew = 1
		:: skew = 2
		fi;
		if
		:: led[r].state == NONE || led[r].state == RELEASED ->
			WRITE(r, CLAIMED, id, now + skew + L)
		:: (led[r].state == CLAIMED || led[r].state == FIRING) &&
		   now + skew >= led[r].exp ->
			WRITE(r, CLAIMED, id, now + skew + L)
		:: else -> goto done
		fi;
#ifdef FENCED
		rfence = led[r].fence;
		runsent = led[r].unsent;
#endif
		skew = 0   /* the local clock is read only here: forget it */
	}
	CRASH;

#ifdef FENCED
	/* 2. Take a fencing token: conditional UpdateItem on the fence item,
	 *    refused once a token passed the point of no return. */
token:
	atomic {
		if
		:: r != HOME && partitioned -> goto refused   /* unreachable */
		:: fpassed != 0 -> goto refused               /* a token passed */
		:: fpassed == 0 -> ftoken++; mytok = ftoken
		:: fpassed == 0 -> ftoken++; goto refused /* applied, response lost */
		fi;
		rfence = 0; runsent = false
	}
	CRASH;

	/* 2b. The fire mark: conditional on still owning the claim; it records
	 *     the token. Lost (another executor reclaimed): no fire. */
	atomic {
		if
		:: led[r].state == CLAIMED && led[r].owner == id ->
			led[r].state = FIRING; led[r].fence = mytok; led[r].unsent = false;
			led[r].ts = now; led[r].wr = r
		:: else -> goto release
		fi
	}
	CRASH;

	/* 3. The point-of-no-return write (fence.Owner.Guard's Pass),
	 *    conditional on the token, immediately before the fire. Any error
	 *    means the function is not called and reports not sent. */
	atomic {
#ifdef RESOLVE
		tstall != mytok;   /* stalled while the operator resolves it */
		tpass[mytok] = true;
#endif
		if
		:: r != HOME && partitioned -> goto notsent    /* outcome unknown: do not fire */
#ifdef BROKEN_PONR
		:: true -> fpassed = mytok
#else
		:: ftoken == mytok && fpassed == 0 -> fpassed = mytok
		/* Applied, response lost; the same state as a pass followed by a
		 * function that reports not sent (its connection was refused). */
		:: ftoken == mytok && fpassed == 0 -> fpassed = mytok; goto notsent
		:: else -> stale = true;
#ifdef REACH_STALE
			assert(false);  /* non-vacuity: a stale token is rejected */
#endif
#ifdef REACH_LATE_PASS
			assert(late != mytok); /* non-vacuity: a settled attempt's late pass is refused */
#endif
			goto notsent
#endif
		fi
	}
	CRASH;
#endif

	/* 4. Fire: the external effect, with the stable provider key. */
	atomic {
#ifdef RESOLVE
		if
		:: tdead[mytok] -> goto done   /* the operator found it stopped: it never calls */
		:: else -> skip
		fi;
#endif
#ifdef DEDUP
		if
		:: !seenKey -> seenKey = true; performed++
		:: else -> skip
		fi;
#else
		performed++;
#endif
		FIRED(mytok);
		assert(performed <= 1);
#ifdef REACH_FIRE_REMOTE
		assert(r == HOME);    /* non-vacuity: a non-home region fires */
#endif
#ifdef REACH_UNSENT_FIRE
		assert(reopened != 1); /* non-vacuity: fired after an executor reopened */
#endif
#ifdef REACH_RESOLVE_FIRE
		assert(reopened != 2); /* non-vacuity: fired after the operator reopened */
#endif
#ifdef REACH_RESOLVE_LOST_FIRE
		/* non-vacuity: fired after the operator reopened and then lost
		 * the race to write the resolution */
		assert(!rlost || reopened != 2);
#endif
	}
#ifdef BROKEN_NOTSENT_LIES
	if
	:: goto notsent        /* the call left, yet the function says not sent */
	:: skip
	fi;
#endif
	CRASH;

	/* 5. Record the outcome: conditional on still being the owner. */
	atomic {
		if
		:: (led[r].state == CLAIMED || led[r].state == FIRING) && led[r].owner == id ->
			WRITE(r, COMPLETED, id, 0)
		:: else -> skip
		fi
	}
	goto done;

#ifdef FENCED
	/* The token was refused or lost: ledger.reopenUnsent. Only when the
	 * claimed record's last fire-marked attempt ended released, not sent,
	 * and once: reopen the fence for that attempt's token, then take a
	 * token again. */
#ifdef BROKEN_REOPEN_RESETS
#define FORGET fpassed = 0; ftoken = 0; REOPENED(1)
#define RETIRE ftoken = 0
#else
#define FORGET fpassed = 0; ftoken++; REOPENED(1) /* the reopened token is retired */
#define RETIRE ftoken++                           /* the newest token is retired */
#endif
refused:
	if
	:: retried || rfence == 0 -> goto release
#ifndef BROKEN_REOPEN_ESCAPED
	:: !runsent -> goto release
#endif
	:: else -> retried = true
	fi;
	atomic {
		if
		:: r != HOME && partitioned -> goto release   /* unreachable */
#ifdef BROKEN_REOPEN_ANY
		:: fpassed != 0 -> FORGET
		:: fpassed != 0 -> FORGET; goto release       /* response lost */
#else
		:: fpassed == rfence -> FORGET
		:: fpassed == rfence -> FORGET; goto release  /* response lost */
		:: fpassed != 0 && fpassed != rfence -> goto release /* another token passed */
#endif
#ifdef BROKEN_REOPEN_KEEPS_UNPASSED
		:: fpassed == 0 -> skip                       /* nothing to forget: nothing changes */
#else
		/* Nothing to forget: the token is retired if it is the newest. */
		:: fpassed == 0 && ftoken == rfence -> RETIRE
		:: fpassed == 0 && ftoken == rfence -> RETIRE; goto release /* response lost */
		:: fpassed == 0 && ftoken != rfence -> skip   /* superseded: nothing changes */
#endif
		fi;
		rfence = 0; runsent = false
	}
	CRASH;
	goto token;

	/* The function was not called (or says its call did not leave):
	 * release the attempt as not sent, conditional on the owner. */
notsent:
	atomic {
		if
		:: led[r].state == FIRING && led[r].owner == id ->
			WRITE(r, RELEASED, 0, 0); led[r].unsent = true
		:: else -> skip
		fi
	}
	goto done;
#endif

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

#if defined(FENCED) && defined(RESOLVE)
/* An operator runs `idemkit effects resolve --as not-delivered` once, in
 * region r, on an escaped effect: the local replica's record is firing
 * (its lease ran out after the fire mark; the expiry check is left out, so
 * this may happen at any time). The operator checked the provider and is
 * truthful: the attempt holding the record's token did not call it, and
 * either has stopped or is stalled before its point-of-no-return write.
 * A stop is modelled here: from the resolution on, that attempt never
 * calls the provider (tdead), though it may still run its other steps (a
 * superset of the attempts that stopped earlier). A stall lasts until
 * after the reopen (tstall); the attempt then wakes and tries to pass.
 * Resolve reopens the fence for that token first, then writes the
 * resolution conditional on the record it read. Once resolved, the record
 * released and fire-marked by no attempt since, the operator may grant one
 * more attempt (resolve it not delivered again): that reopens the fence
 * for the same token once more. */
#ifdef BROKEN_REOPEN_KEEPS_UNPASSED
#define OPRETIRE skip                         /* nothing passed: nothing changes */
#else
#define OPRETIRE if :: ftoken == t -> ftoken++ :: else -> skip fi /* retire the newest */
#endif
/* The operator's reopen of token t. */
#define OPREOPEN \
		if \
		:: r != HOME && partitioned -> goto out       /* unreachable: nothing written */ \
		:: fpassed == t -> fpassed = 0; ftoken++; REOPENED(2) \
		:: fpassed == t -> fpassed = 0; ftoken++; REOPENED(2); goto out /* response lost */ \
		:: fpassed != 0 && fpassed != t -> goto out   /* another token passed */ \
		:: fpassed == 0 -> OPRETIRE                   /* nothing to forget */ \
		:: fpassed == 0 -> OPRETIRE; goto out         /* response lost */ \
		fi
proctype Op(byte r)
{
	byte t;
	byte o;
end:
	atomic {
		led[r].state == FIRING &&
#if defined(BROKEN_RESOLVE_LIES)
		true ->                        /* its call may have left */
#else
		!tfired[led[r].fence] ->
#endif
		t = led[r].fence; o = led[r].owner;
#ifndef BROKEN_RESOLVE_ALIVE
		if
		:: tdead[t] = true             /* it has stopped */
		:: !tpass[t] -> tstall = t; LATE(t) /* stalled before its pass */
		fi
#else
		skip                           /* it has not called yet, but runs on */
#endif
	}
	atomic {
		tstall = 0;                    /* after the reopen, the stall may end */
		OPREOPEN
	}
	/* The resolution: released, the escaped attempt's token kept, not
	 * marked not sent (the escaped attempt stays escaped). It loses the
	 * race if the record changed since it was read. */
	atomic {
		if
		:: led[r].state == FIRING && led[r].owner == o && led[r].fence == t ->
			WRITE(r, RELEASED, 0, 0)
		:: else -> RLOST; goto out
		fi
	}
	/* The grant of one more attempt, while no attempt fire-marked the
	 * record since the resolution (its record write changes nothing the
	 * model reads: it only raises the attempts allowed). */
end_grant:
	atomic {
		led[r].state == RELEASED && led[r].fence == t ->
		OPREOPEN
	}
out:
	skip
}
#endif

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
		(led[from].state != led[to].state || led[from].owner != led[to].owner ||
		 led[from].fence != led[to].fence || led[from].unsent != led[to].unsent) ->
		if
		:: led[to].state != NONE && led[from].owner != 0 && led[to].owner != 0 &&
		   led[from].owner != led[to].owner -> conflict = true
		:: else -> skip
		fi;
		led[to].state = led[from].state;
		led[to].owner = led[from].owner;
		led[to].exp = led[from].exp;
		led[to].ts = led[from].ts;
		led[to].wr = led[from].wr;
		led[to].fence = led[from].fence;
		led[to].unsent = led[from].unsent
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
#if defined(FENCED) && defined(RESOLVE)
		/* With the operator, a third executor only in one region: in two
		 * it takes the search past the memory bound (over 75 million
		 * states without an end). */
#if REGIONS == 1
		run Exec(3, 0);
#endif
		run Op(REGIONS - 1);
#else
		run Exec(3, 0);
#endif
#if REGIONS > 1
		run Rep(0, 1);
		run Rep(1, 0);
		run Partition();
#endif
	}
}
