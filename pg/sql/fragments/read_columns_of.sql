-- read_columns.sql of a subquery {of} that selected them, its ctids as `tid`.
{of}.tid, {of}.id, {of}.key, {of}.dedup_key, {of}.priority, {of}.attempts, {of}.payload, {of}.enqueued_at, {of}.run_at, {of}.group_id
