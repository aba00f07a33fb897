/* The Domain Store's moves, one table for the store and the protocol
 * models (issue 17): core/store/domainstore.c refuses to write any move of
 * a generation, participant or session row that is not listed here, and
 * the Promela models in protocol/ include this file and assert that each
 * move they make is listed. The names are the store's column values and
 * the models' mtype names; `none` is "no row yet" (the insert).
 *
 * An X-macro: the includer defines LZ_MOVE(kind, from, to). No include
 * guard, on purpose. Only the C preprocessor's syntax: spin reads it too. */

/* Generations (spec 3.3): forward only; stopped and failed are terminal. */
LZ_MOVE(generation, none, starting)
LZ_MOVE(generation, starting, published)
LZ_MOVE(generation, starting, stopping)
LZ_MOVE(generation, starting, stopped)
LZ_MOVE(generation, starting, failed)
LZ_MOVE(generation, published, stopping)
LZ_MOVE(generation, published, stopped)
LZ_MOVE(generation, published, failed)
LZ_MOVE(generation, stopping, stopped)
LZ_MOVE(generation, stopping, failed)

/* Participants (spec 3.3, 3.6): no bare intent becomes active. */
LZ_MOVE(participant, none, intent)
LZ_MOVE(participant, intent, acquiring)
LZ_MOVE(participant, intent, release)
LZ_MOVE(participant, intent, clean)
LZ_MOVE(participant, acquiring, active)
LZ_MOVE(participant, acquiring, release)
LZ_MOVE(participant, active, release)
LZ_MOVE(participant, release, clean)

/* Session Terminals (spec 3.4): released sessions never run again. */
LZ_MOVE(session, none, intent)
LZ_MOVE(session, intent, running)
LZ_MOVE(session, intent, release)
LZ_MOVE(session, intent, clean)
LZ_MOVE(session, running, release)
LZ_MOVE(session, release, clean)
