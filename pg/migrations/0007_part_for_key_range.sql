-- Migration 7: part_for_key() refuses a part count outside 1..4096
--
-- part_for_key() says what is wrong with a part count outside
-- 1..4096 instead of dividing by zero.

-- A part count of 0 was "division by zero", a negative one a negative part.
-- Still a plain SQL function (inlined where it is used): the CASE calls the
-- raising function only for a bad count.
CREATE FUNCTION {schema}.bad_part_count(parts int) RETURNS int
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RAISE EXCEPTION 'parts must be between 1 and 4096, not %', parts USING ERRCODE = '22023';
END
$$;

CREATE OR REPLACE FUNCTION {schema}.part_for_key(key text, parts int) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE WHEN parts BETWEEN 1 AND 4096
            THEN (({schema}.murmur2(convert_to(key, 'UTF8')) & 2147483647) % parts)::int
            ELSE {schema}.bad_part_count(parts) END;
