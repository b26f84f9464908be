-- For the rest of the transaction (the ack and its COMMIT), plans use no
-- sequential scan and are generic from the first run. A generic plan made
-- while `items` was nearly empty (a worker that started on an idle queue)
-- would otherwise scan the whole table for every batch once a backlog has
-- come; and the claim's LIMIT $n makes the planner prefer a custom plan,
-- planned anew on every run (over a millisecond for this statement). JIT
-- off again here (OpenConnection sets it for the session) in case a
-- handler turned it on. The handler's statements ran before it, under the
-- session's own settings.
SELECT set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true)
