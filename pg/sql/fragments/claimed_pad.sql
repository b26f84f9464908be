-- The NULLs that pad the ('p'|'a'|...) rows of a statement that returns
-- them next to claimed rows (claimed_rows.sql).
NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
