/* Host escalation (spec 3.8; DX-4), as core/escalation/escalation.c and
 * the coordinator do it: two sessions each make one request; the sandbox
 * may replay its request record and cancel it; the developer may deny it;
 * the coordinator may crash at any step, and bootstrap recovery by the
 * next coordinator ends the lost generation's requests without running
 * them (its sandbox, mailbox and keys are gone with it). State names are
 * the Domain Store's escalation rows (none, accepted, running, ended).
 *
 * Safety (assertions): a request's host process runs at most once, replays
 * and crashes included; a result goes only to the session whose request it
 * answers; a request cancelled or denied before it ran never runs.
 * Liveness (ltl, weak fairness): every accepted request ends. */

mtype = { none, accepted, running, ended };

mtype esc[2] = none;    /* the store's row of each session's request */
byte runs[2];           /* times its host process was started */
bool cancelled[2];      /* by the sandbox, or denied by the developer */
bool hc_alive = true;
bool generation_lost = false;
chan outbox = [4] of { byte };        /* request records, by session */
chan inbox[2] = [1] of { byte };      /* results, each to its session */

proctype Sandbox(byte s)
{
	byte who;
	outbox ! s;
	if :: outbox ! s :: skip fi;                      /* a replay */
	if :: cancelled[s] = true :: skip fi;             /* Ctrl-C inside */
	if
	:: atomic { inbox[s] ? who -> assert(who == s) }
	:: generation_lost -> skip
	fi
}

active proctype HC()
{
	byte s;
	do
	:: atomic { hc_alive && nempty(outbox) -> outbox ? s;
		/* taken once; an ID already recorded is a replay: refused */
		if
		:: esc[s] == none -> esc[s] = accepted
		:: else -> skip
		fi }
	:: atomic { hc_alive && esc[0] == accepted && !cancelled[0] ->
		esc[0] = running; runs[0]++ }
	:: atomic { hc_alive && esc[1] == accepted && !cancelled[1] ->
		esc[1] = running; runs[1]++ }
	:: atomic { hc_alive && esc[0] == accepted && cancelled[0] -> esc[0] = ended; inbox[0] ! 0 }
	:: atomic { hc_alive && esc[1] == accepted && cancelled[1] -> esc[1] = ended; inbox[1] ! 1 }
	:: atomic { hc_alive && esc[0] == running -> esc[0] = ended; inbox[0] ! 0 }
	:: atomic { hc_alive && esc[1] == running -> esc[1] = ended; inbox[1] ! 1 }
	:: atomic { hc_alive -> hc_alive = false; generation_lost = true }   /* kill -9 */
	:: !hc_alive -> break
	od;
	/* Bootstrap recovery: the lost generation's requests end unrun. */
	for (s : 0 .. 1) {
#ifdef BROKEN_RERUN_AFTER_CRASH
		if
		:: esc[s] == accepted || esc[s] == running -> runs[s]++
		:: else -> skip
		fi;
#endif
		esc[s] = ended
	}
}

init
{
	atomic { run Sandbox(0); run Sandbox(1) }
}

active proctype AtMostOnce()
{
	do
	:: atomic { assert(runs[0] <= 1 && runs[1] <= 1) }
	:: atomic { timeout -> assert(runs[0] <= 1 && runs[1] <= 1); break }
	od
}

ltl requests_end { [] ((esc[0] == accepted) -> <> (esc[0] == ended)) }
