// Every SQL statement PgStore prepares, composed from the files under
// pg/sql/ (embedded at build time: embedded_sql.h). A statement is a file
// NAME.sql; one that shares parts with others has holes ("{fence}") that
// the fragments under pg/sql/fragments/ fill, and the claim and Finish
// statements come in forms per kind of queue (fair, without a key bound,
// byte-bounded), composed here. Each file says what its SQL does and why it
// looks as it does; this file only says which pieces go where. Statements
// are prepared once per connection (libpqxx sends the Parse on first use)
// and take arrays as text literals ("{1,2,3}"), because libpqxx 6.4 cannot
// bind vectors.
//
// Conventions: times travel as microseconds since the epoch (or microseconds
// of an interval) in bigint, so the client never parses timestamp text (the
// claim's per-item ones via date_part, a float8, where extract would be
// numeric arithmetic twice per item); bytea travels as its text form
// ("\x0a0b") and is decoded by DecodeBytea.
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "pg/embedded_sql.h"
#include "pg/migrations.h"
#include "pg/pg_store_internal.h"

namespace partq {
namespace pg_internal {
namespace {

// The names of the files StatementSql has read (SqlFilesRead).
absl::Mutex files_read_mu;
absl::flat_hash_set<std::string>& FilesRead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(files_read_mu) {
  static auto* const read = new absl::flat_hash_set<std::string>;
  return *read;
}

// The statement or fragment in pg/sql/NAME.sql, without the comment lines
// that head the file (they say why it looks as it does, for its readers,
// not the server) and without the file's last newline: the server sees the
// statement as it is written, which is what pg_stat_activity shows and
// tests match.
std::string StatementSql(absl::string_view name) {
  {
    absl::MutexLock lock(&files_read_mu);
    FilesRead().emplace(name);
  }
  absl::string_view text = EmbeddedSql(absl::StrCat("sql/", name, ".sql"));
  while (absl::StartsWith(text, "--")) {
    const size_t nl = text.find('\n');
    text.remove_prefix(nl == absl::string_view::npos ? text.size() : nl + 1);
  }
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

using Holes = std::initializer_list<std::pair<absl::string_view, absl::string_view>>;

// StatementSql(name) with its holes ("{fence}", ...) filled: fragments that
// several statements share and that live in one place (pg/sql/fragments),
// and the SQL expressions a fragment is written for. Values are not
// searched for holes again; `{schema}` is filled last, by WithSchema.
std::string Fill(absl::string_view name, Holes holes) {
  return absl::StrReplaceAll(StatementSql(name), holes);
}

// fragments/NAME.sql, filled.
std::string Fragment(absl::string_view name, Holes holes = {}) {
  return Fill(absl::StrCat("fragments/", name), holes);
}

// The columns of a claim read (fragments/read_columns.sql) of `items i`
// itself, and of a subquery `of` that selected them.
std::string ReadColumns() { return Fragment("read_columns"); }
std::string ReadColumnsOf(absl::string_view of) {
  return Fragment("read_columns_of", {{"{of}", of}});
}

// The arguments of a claim read that say where it reads and what it skips
// (ReadyItems).
struct ReadAt {
  absl::string_view queue, part, after_prio, after_id, cursor_prio, cursor_id, skip, bound, limit;
  absl::string_view key_floors;  // jsonb (fragments/key_floors.sql); empty: none
};

// One step of a skip scan of `queue`'s `part` in items_key
// (fragments/fair_next_key.sql): the first key `op` `lower`, and at most
// `upper` if given, of the index or of `cursors` (a FROM item `c` and its
// WHERE).
std::string NextKey(absl::string_view queue, absl::string_view part, absl::string_view cursors,
                    absl::string_view op, absl::string_view lower, absl::string_view upper = "") {
  const std::string at_most = upper.empty() ? "" : absl::StrCat(" AND k.key <= ", upper);
  const std::string c_at_most = upper.empty() ? "" : absl::StrCat(" AND c.key <= ", upper);
  return Fragment("fair_next_key", {{"{queue}", queue},
                                    {"{part}", part},
                                    {"{op}", op},
                                    {"{lower}", lower},
                                    {"{at_most}", at_most},
                                    {"{cursors}", cursors},
                                    {"{c_at_most}", c_at_most}});
}

// fragments/earlier_parts.sql: at most `limit` of the key's older items in
// `queue`'s earlier parts.
std::string EarlierParts(absl::string_view queue, absl::string_view limit) {
  return Fragment("earlier_parts", {{"{queue}", queue}, {"{limit}", limit}});
}

// fragments/ready_condition.sql for a read of `queue`'s `part`; an
// ordered probe only from `probe_from` on (an id expression, read up from
// it unless it is the least bigint: fragments/ordered_probe_up.sql, where
// `skip` is the claim's array of ids in flight; empty: all the way, read
// down from the item: ordered_probe_down.sql).
std::string ReadyCondition(absl::string_view queue, absl::string_view part, absl::string_view bound,
                           absl::string_view probe_from = "", absl::string_view skip = "") {
  auto earlier = [&](absl::string_view limit) { return EarlierParts(queue, limit); };
  const std::string limit_bound = absl::StrCat(bound, "::int");
  const std::string down = Fragment("ordered_probe_down", {{"{queue}", queue}});
  const std::string probe = probe_from.empty()
                                ? down
                                : Fragment("ordered_probe_up", {{"{queue}", queue},
                                                                {"{probe_from}", probe_from},
                                                                {"{skip}", skip},
                                                                {"{down}", down}});
  return Fragment("ready_condition", {{"{queue}", queue},
                                      {"{part}", part},
                                      {"{bound}", bound},
                                      {"{ordered_probe}", probe},
                                      {"{earlier_bound}", earlier(limit_bound)},
                                      {"{earlier_one}", earlier("1")}});
}

// fragments/ready_onward.sql of `rows`, gated by `gate` (empty: none).
std::string ReadyOnward(const ReadAt& at, absl::string_view ready, absl::string_view rows,
                        absl::string_view columns, absl::string_view gate) {
  return Fragment("ready_onward", {{"{columns}", columns},
                                   {"{rows}", rows},
                                   {"{ready}", ready},
                                   {"{after_prio}", at.after_prio},
                                   {"{after_id}", at.after_id},
                                   {"{cursor_prio}", at.cursor_prio},
                                   {"{cursor_id}", at.cursor_id},
                                   {"{skip}", at.skip},
                                   {"{gate}", gate},
                                   {"{limit}", at.limit}});
}

// The onward read: flat, or for a claim with a key bound, a window of rows
// and the keys' first items (fragments/ready_keyed.sql).
std::string Onward(const ReadAt& at, absl::string_view ready) {
  if (at.bound == "0") return ReadyOnward(at, ready, "{schema}.items i", ReadColumns(), "");
  const std::string window = Fragment("ready_window", {{"{queue}", at.queue},
                                                       {"{part}", at.part},
                                                       {"{after_prio}", at.after_prio},
                                                       {"{after_id}", at.after_id},
                                                       {"{limit}", at.limit}});
  const std::string bound = absl::StrCat(at.bound, "::int");
  const std::string floors = at.key_floors.empty() ? "'{}'::jsonb" : std::string(at.key_floors);
  const std::string cursors = "floors c WHERE true";
  // From the head, or from a cursor when the claim asks for the keys' heads.
  const std::string gate = absl::StrCat(at.after_id, " = -9223372036854775808 OR (", floors,
                                        " #> ARRAY[(", at.part, ")::text, 'heads']) IS NOT NULL");
  const std::string heads = Fragment(
      "ready_heads",
      {{"{columns_of_i}", ReadColumnsOf("i")},
       {"{bound}", at.bound},
       {"{gate}", gate},
       {"{key_floors}",
        Fragment("key_floors", {{"{floors}", floors}, {"{part}", at.part}, {"{as}", "kf"}})},
       {"{first_key}", NextKey(at.queue, at.part, cursors, ">=", "''")},
       {"{next_key}", NextKey(at.queue, at.part, cursors, ">", "hd.key")},
       {"{queue}", at.queue},
       {"{part}", at.part},
       {"{limit}", at.limit},
       {"{skip}", at.skip},
       {"{earlier}", EarlierParts(at.queue, bound)}});
  // The walk on (a read from the head that found nothing else).
  const std::string walk_gate = absl::StrCat(" AND ", at.after_id,
                                             " = -9223372036854775808 AND NOT EXISTS (SELECT "
                                             "1 FROM found)");
  return Fragment("ready_keyed",
                  {{"{windowed}",
                    ReadyOnward(at, ready, window, ReadColumnsOf("i"),
                                absl::StrCat(" AND (i.key IS NULL OR i.key_rank <= ", bound, ")"))},
                   {"{heads}", heads},
                   {"{flat}", ReadyOnward(at, ready, "{schema}.items i", ReadColumns(), walk_gate)},
                   {"{limit}", at.limit}});
}

}  // namespace

// fragments/ready_items.sql: the reads of the items of a priority below 0
// from the head (`above`, empty: none), behind the start (`behind`, empty:
// none), of the released keys (`released`, empty: none) and onward, the
// onward read's ordered probes from the keys' floors in `key_floors` on
// (fragments/key_floor.sql; empty: all the way).
std::string ReadyItems(absl::string_view queue, absl::string_view part,
                       absl::string_view after_prio, absl::string_view after_id,
                       absl::string_view cursor_prio, absl::string_view cursor_id,
                       absl::string_view skip, absl::string_view bound, absl::string_view limit,
                       absl::string_view behind, absl::string_view released,
                       absl::string_view key_floors, absl::string_view above) {
  const ReadAt at{queue,     part, after_prio, after_id, cursor_prio,
                  cursor_id, skip, bound,      limit,    key_floors};
  const std::string ready = ReadyCondition(queue, part, bound);
  const std::string onward = Onward(
      at, key_floors.empty()
              ? ready
              : ReadyCondition(queue, part, bound,
                               Fragment("key_floor", {{"{floors}", key_floors}, {"{part}", part}}),
                               skip));
  if (behind.empty() && released.empty() && above.empty()) return onward;
  std::vector<std::string> reads;
  if (!above.empty()) {
    reads.push_back(Fragment("ready_above", {{"{columns}", ReadColumns()},
                                             {"{ready}", ready},
                                             {"{above}", above},
                                             {"{after_prio}", after_prio},
                                             {"{skip}", skip},
                                             {"{limit}", limit}}));
  }
  if (!behind.empty()) {
    const std::string not_above = above.empty()
                                      ? ""
                                      : absl::StrCat(" AND NOT (", above, " AND ", after_prio,
                                                     "::int >= 0 AND i.priority < 0)");
    reads.push_back(Fragment("ready_behind", {{"{columns}", ReadColumns()},
                                              {"{ready}", ready},
                                              {"{behind}", behind},
                                              {"{not_above}", not_above},
                                              {"{after_prio}", after_prio},
                                              {"{after_id}", after_id},
                                              {"{skip}", skip},
                                              {"{limit}", limit}}));
  }
  if (!released.empty()) {
    const std::string not_behind =
        behind.empty() ? "" : absl::StrCat(" AND NOT (", behind, " AND i.run_at > i.enqueued_at)");
    reads.push_back(
        Fragment("ready_released", {{"{columns_of_rows}", ReadColumnsOf("i")},
                                    {"{released}", released},
                                    {"{queue}", queue},
                                    {"{part}", part},
                                    {"{ready}", ReadyCondition(queue, part, bound, "rel.id", skip)},
                                    {"{after_prio}", after_prio},
                                    {"{after_id}", after_id},
                                    {"{skip}", skip},
                                    {"{not_behind}", not_behind},
                                    {"{limit}", limit}}));
  }
  reads.push_back(onward);
  return Fragment("ready_items",
                  {{"{reads}", absl::StrCat("(", absl::StrJoin(reads, ")\n  UNION ALL\n  ("), ")")},
                   {"{limit}", limit}});
}

namespace {

// fragments/key_cursors.sql of part `part`, as `as`.
std::string KeyCursors(absl::string_view parts, absl::string_view keys, absl::string_view ids,
                       absl::string_view as, absl::string_view part) {
  return Fragment(
      "key_cursors",
      {{"{parts}", parts}, {"{keys}", keys}, {"{ids}", ids}, {"{as}", as}, {"{part}", part}});
}

// fragments/fair_items.sql: a fair claim's read of `part`, its keys after
// `key_after`.
std::string FairItems(absl::string_view queue, absl::string_view part, absl::string_view key_after,
                      absl::string_view cursor_parts, absl::string_view cursor_keys,
                      absl::string_view cursor_ids, absl::string_view skip, absl::string_view bound,
                      absl::string_view limit, absl::string_view behind) {
  const std::string from = absl::StrCat("coalesce(", key_after, ", '')");
  const std::string cursors = KeyCursors(cursor_parts, cursor_keys, cursor_ids, "c", part);
  auto next_key = [&](absl::string_view op, absl::string_view lower, absl::string_view upper) {
    return NextKey(queue, part, cursors, op, lower, upper);
  };
  return Fragment(
      "fair_items",
      {{"{columns_of_x}", ReadColumnsOf("x")},
       {"{columns_of_i}", ReadColumnsOf("i")},
       {"{queue}", queue},
       {"{part}", part},
       {"{bound}", bound},
       {"{columns}", ReadColumns()},
       {"{onward_first}", next_key(">", from, "")},
       {"{onward_next}", next_key(">", "w.key", "")},
       {"{around_first}", next_key(">=", "''", from)},
       {"{around_next}", next_key(">", "a.key", from)},
       {"{cursors}", cursors},
       {"{behind}", behind},
       {"{ready}", ReadyCondition(queue, part, bound)},
       {"{ready_keyless}", ReadyCondition(queue, part, "0")},
       {"{ready_after}",
        ReadyCondition(queue, part, bound, "coalesce(t.after_id, -9223372036854775808)", skip)},
       {"{skip}", skip},
       {"{limit}", limit}});
}

// The forms of a claiming statement: a fair read (FairItems) or not; the
// form without a key bound (`unkeyed`: the literal 0, fragments/claim_ctes.sql
// says why); byte-bounded (ClaimRequest::max_bytes) or not.
struct StatementForm {
  bool fair = false;
  bool unkeyed = false;
  bool bounded = false;
};

// The parameters of fragments/claim_ctes.sql, numbered from `first` on in
// the order PgStore::Claim binds them (pg_store_items.cc, AppendClaimParams).
struct ClaimParamNumbers {
  ClaimParamNumbers(int first, const StatementForm& form) {
    int n = first;
    for (int* f :
         {&parts, &epochs, &after_prio, &after_id, &limits, &key_bound, &suspect, &fly_parts,
          &fly_ids, &total, &cursor_prio, &cursor_id, &records, &behind, &key_after, &above}) {
      *f = n++;
    }
    if (form.bounded) bytes = n++;
    // Only the fair form has the key cursors (an unkeyed one would leave
    // them untyped); the keyed form has them too, as an ordered claim's
    // released keys (ready_items.sql).
    if (form.fair || !form.unkeyed) {
      for (int* f : {&key_cursor_parts, &key_cursor_keys, &key_cursor_ids}) *f = n++;
    }
    // The keyed form alone has an ordered claim's key floors (ReadyItems).
    if (!form.fair && !form.unkeyed) key_floors = n++;
  }
  int queue = 1, session = 2, parts, epochs, after_prio, after_id, limits, key_bound, suspect,
      fly_parts, fly_ids, total, cursor_prio, cursor_id, records, behind, key_after, above,
      bytes = 0, key_cursor_parts = 0, key_cursor_keys = 0, key_cursor_ids = 0, key_floors = 0;
};

std::string Param(int k) { return absl::StrCat("$", k); }

// fragments/claim_ctes.sql, its parameters from `first` on, skipping
// `extra_skip` besides what is in flight.
std::string ClaimCtes(int first, absl::string_view extra_skip, bool async_commit,
                      const StatementForm& form) {
  const ClaimParamNumbers p(first, form);
  const std::string bound = form.unkeyed ? "0" : Param(p.key_bound);
  const std::string unkeyed_only =
      form.unkeyed ? absl::StrCat(" AND ", Param(p.key_bound), "::int = 0") : std::string();
  const std::string skip = "(SELECT ids FROM skip)::bigint[]";
  const std::string queue = Param(p.queue);
  const std::string reads =
      form.fair
          ? FairItems(queue, "own.part", "own.key_after", Param(p.key_cursor_parts),
                      Param(p.key_cursor_keys), Param(p.key_cursor_ids), skip, bound, "own.lim",
                      "own.behind")
          : ReadyItems(
                queue, "own.part", "own.after_prio", "own.after_id", "own.cursor_prio",
                "own.cursor_id", skip, bound, "own.lim", "own.behind",
                form.unkeyed ? ""
                             : KeyCursors(Param(p.key_cursor_parts), Param(p.key_cursor_keys),
                                          Param(p.key_cursor_ids), "rel", "own.part"),
                form.unkeyed ? "" : absl::StrCat(Param(p.key_floors), "::jsonb"), "own.above");
  const std::string async =
      async_commit ? absl::StrCat("\n", Fragment("claim_async_commit")) : std::string();
  const std::string bytes_before =
      form.bounded ? absl::StrCat(", ", Fragment("bytes_before")) : std::string();
  const std::string bytes_bound =
      form.bounded ? absl::StrCat("\n  WHERE x.bytes_before < ", Param(p.bytes), "::bigint")
                   : std::string();
  return Fragment("claim_ctes", {{"{queue}", queue},
                                 {"{session}", Param(p.session)},
                                 {"{parts}", Param(p.parts)},
                                 {"{epochs}", Param(p.epochs)},
                                 {"{after_prio}", Param(p.after_prio)},
                                 {"{after_id}", Param(p.after_id)},
                                 {"{limits}", Param(p.limits)},
                                 {"{cursor_prio}", Param(p.cursor_prio)},
                                 {"{cursor_id}", Param(p.cursor_id)},
                                 {"{records}", Param(p.records)},
                                 {"{behind}", Param(p.behind)},
                                 {"{key_after}", Param(p.key_after)},
                                 {"{above}", Param(p.above)},
                                 {"{unkeyed_only}", unkeyed_only},
                                 {"{async_commit}", async},
                                 {"{fly_ids}", Param(p.fly_ids)},
                                 {"{fly_parts}", Param(p.fly_parts)},
                                 {"{extra_skip}", extra_skip},
                                 {"{columns_of_x}", ReadColumnsOf("x")},
                                 {"{bytes_before}", bytes_before},
                                 {"{reads}", reads},
                                 {"{total}", Param(p.total)},
                                 {"{bytes_bound}", bytes_bound},
                                 {"{suspect}", Param(p.suspect)}});
}

// fragments/unrecord.sql, leaving a claim's parts to it when `with_claim`.
std::string UnrecordCte(bool with_claim) {
  return Fragment("unrecord", {{"{not_claimed}",
                                with_claim ? absl::StrCat("\n", Fragment("unrecord_not_claimed"))
                                           : std::string()}});
}

std::string FenceCte() { return Fragment("fence_cte"); }
std::string AckCtes() { return Fragment("ack_ctes", {{"{fence}", FenceCte()}}); }
std::string FinishCtes() { return Fragment("finish_ctes", {{"{fence}", FenceCte()}}); }

// fragments/take_over_claims.sql of the CTE `src`.
std::string TakeOverClaims(absl::string_view src) {
  return Fragment("take_over_claims", {{"{src}", src}});
}

// The shape of a pipelined ack (PipelinedAck).
struct AckForm {
  bool with_claim = false;  // pipelined_ack_claim.sql, else pipelined_ack.sql
  bool behind = false;      // the claim reads from behind its start too
  bool keyed = false;       // with a key bound: the key floors are a parameter
  bool bounded = false;     // byte-bounded: the bound is a parameter
  bool results = false;     // the handler's results: the last two parameters
};

// pipelined_ack.sql, or pipelined_ack_claim.sql, in `form`.
std::string PipelinedAck(const AckForm& form) {
  const bool behind = form.behind, keyed = form.keyed, bounded = form.bounded;
  // The results' parameters follow all others.
  const int results_at = form.with_claim ? 18 + bounded + keyed : 7;
  const std::string res =
      form.results
          ? Fragment("pipelined_res_results", {{"{result_ids}", absl::StrCat("$", results_at)},
                                               {"{results}", absl::StrCat("$", results_at + 1)}})
          : Fragment("pipelined_res");
  const std::string ack_ctes =
      Fragment("pipelined_ack_ctes", {{"{fence}", FenceCte()}, {"{res}", res}});
  const std::string check = Fragment("pipelined_check");
  if (!form.with_claim) {
    return Fill("pipelined_ack", {{"{ack_ctes}", ack_ctes}, {"{check}", check}});
  }
  return Fill(
      "pipelined_ack_claim",
      {{"{ack_ctes}", ack_ctes},
       {"{columns_of_x}", ReadColumnsOf("x")},
       {"{bytes_before}", bounded ? absl::StrCat(", ", Fragment("bytes_before")) : ""},
       {"{reads}", ReadyItems("$1", "$7", "$9", "$10::bigint", "$15", "$16::bigint",
                              "$14::bigint[]", keyed ? "$12" : "0", "$11", behind ? "true" : "",
                              /*released=*/"",
                              !keyed    ? ""
                              : bounded ? "$19::jsonb"
                                        : "$18::jsonb")},
       {"{unkeyed_only}", keyed ? "" : " AND $12::int = 0"},
       {"{bytes_bound}", bounded ? "\n  WHERE x.bytes_before < $18::bigint" : ""},
       {"{check}", check}});
}

// claim.sql in its form.
std::string ClaimStatement(const StatementForm& form) {
  return Fill("claim", {{"{claim_ctes}",
                         ClaimCtes(/*first=*/3, "'{}'::bigint[]", /*async_commit=*/true, form)},
                        {"{claimed_rows}", Fragment("claimed_rows")}});
}

// finish.sql, without a claim ahead.
std::string FinishStatement() {
  return Fill("finish", {{"{finish_ctes}", FinishCtes()}, {"{unrecord}", UnrecordCte(false)}});
}

// finish_claim.sql in the claim's form.
std::string FinishClaimStatement(const StatementForm& form) {
  return Fill("finish_claim",
              {{"{finish_ctes}", FinishCtes()},
               {"{claim_ctes}", ClaimCtes(/*first=*/17, "$5::bigint[] || $9::bigint[]",
                                          /*async_commit=*/false, form)},
               {"{unrecord}", UnrecordCte(true)},
               {"{typed_pad}", Fragment("claimed_pad_typed")},
               {"{pad}", Fragment("claimed_pad")},
               {"{claimed_rows}", Fragment("claimed_rows")}});
}

// ack_claim.sql in the claim's form.
std::string AckClaimStatement(const StatementForm& form) {
  return Fill("ack_claim", {{"{ack_ctes}", AckCtes()},
                            {"{claim_ctes}",
                             ClaimCtes(/*first=*/9, "$5::bigint[]", /*async_commit=*/false, form)},
                            {"{typed_pad}", Fragment("claimed_pad_typed")},
                            {"{pad}", Fragment("claimed_pad")},
                            {"{claimed_rows}", Fragment("claimed_rows")}});
}

// The holes where a claim or Finish statement deletes (or updates items:
// retries, a takeover's mark), filled with fragments/NAME.sql for a role
// that may delete from the table itself, or, for one that may not (a
// worker role: a DELETE privilege would let it LOCK the table every queue
// shares, an UPDATE of items lock another queue's item by an ON CONFLICT),
// with fragments/NAME_confined.sql, which writes through a function or a
// rule of migration 39 or 40. A statement
// `guarded` runs after plan_guard.sql (the pipelined ones), and a confined
// worker's then deletes through a rule where NAME_guarded.sql has one, the
// owner's claim records with a DELETE of its own (drop_records_inline.sql):
// a rule or a DELETE is planned into the statement, a PL/pgSQL call costs
// its set-up in every transaction; elsewhere a generic plan could be a
// sequential scan, which the functions' enable_seqscan = off rules out.
std::string FillDeletes(absl::string_view sql, bool confined, bool guarded) {
  std::vector<std::pair<std::string, std::string>> holes;
  const std::string current_record = Fragment("current_record");
  for (const char* hole : {"delete_done", "delete_acked", "delete_dead", "delete_done_lean",
                           "replace_record", "retry_items", "abandon_items"}) {
    const bool by_rule = confined && guarded && absl::string_view(hole) == "delete_done_lean";
    const char* form = by_rule ? "_guarded" : confined ? "_confined" : "";
    holes.emplace_back(absl::StrCat("{", hole, "}"),
                       Fragment(absl::StrCat(hole, form), {{"{current_record}", current_record}}));
  }
  holes.emplace_back(
      "{drop_records}",
      guarded ? Fragment(confined ? "drop_records_guarded" : "drop_records_inline")
              : Fragment("drop_records", {{"{drop_fn}", confined ? "drop_claim_records_of_mine"
                                                                 : "drop_claim_records"}}));
  return absl::StrReplaceAll(sql, holes);
}

}  // namespace

std::vector<std::string> SqlFilesRead() {
  absl::MutexLock lock(&files_read_mu);
  return std::vector<std::string>(FilesRead().begin(), FilesRead().end());
}

const char* ResultsName(const char* name) {
  static const auto* const names = [] {
    auto* m = new absl::flat_hash_map<std::string, std::string>;
    (*m)[kPipelinedAck] = absl::StrCat(kPipelinedAck, "_results");
    for (const char* n : {kPipelinedAckClaim, kPipelinedAckClaimBehind, kPipelinedAckClaimKeyed,
                          kPipelinedAckClaimBehindKeyed}) {
      (*m)[n] = absl::StrCat(n, "_results");
      (*m)[BoundedName(n)] = absl::StrCat(BoundedName(n), "_results");
    }
    return m;
  }();
  return names->at(name).c_str();
}

const char* BoundedName(const char* name) {
  static const auto* const names = [] {
    auto* m = new absl::flat_hash_map<std::string, std::string>;
    for (const char* n : {kPipelinedAckClaim, kPipelinedAckClaimBehind, kPipelinedAckClaimKeyed,
                          kPipelinedAckClaimBehindKeyed, kPipelinedClaim, kPipelinedClaimFair,
                          kPipelinedLeanAckClaim, kPipelinedLeanAckClaimFair, kPipelinedFinishClaim,
                          kPipelinedFinishClaimFair, kPipelinedClaimKeyed,
                          kPipelinedLeanAckClaimKeyed, kPipelinedFinishClaimKeyed}) {
      (*m)[n] = absl::StrCat(n, "_bytes");
    }
    return m;
  }();
  return names->at(name).c_str();
}

std::vector<std::pair<const char*, std::string>> PipelinedStatements(absl::string_view schema,
                                                                     bool confined) {
  const StatementForm unkeyed{/*fair=*/false, /*unkeyed=*/true};
  const StatementForm fair{/*fair=*/true};
  const StatementForm unkeyed_bytes{/*fair=*/false, /*unkeyed=*/true, /*bounded=*/true};
  const StatementForm fair_bytes{/*fair=*/true, /*unkeyed=*/false, /*bounded=*/true};
  const StatementForm keyed;
  const StatementForm keyed_bytes{/*fair=*/false, /*unkeyed=*/false, /*bounded=*/true};
  // Each statement's file says what it does and why it looks as it does.
  std::vector<std::pair<const char*, std::string>> s = {
      {kPlanGuard, StatementSql("plan_guard")},
      {kPlanGuardKeyed, StatementSql("plan_guard_keyed")},
      {kPipelinedCommit, "COMMIT"},
      // Commits and begins the next transaction, where the claimed batch
      // runs (FinishRequest::begin_next).
      {kPipelinedChain, "COMMIT AND CHAIN"},
      // A claim in a transaction of its own, which kPipelinedChain commits
      // and follows with the transaction its batch runs in.
      {kPipelinedBegin, "BEGIN"},
      {kPipelinedLocalSettings, kLocalSettings},
      // claim.sql, ack_claim.sql and finish.sql / finish_claim.sql in the
      // forms that run after kPlanGuard (PgStore::Claim, FinishOnce).
      {kPipelinedClaim, ClaimStatement(unkeyed)},
      {kPipelinedClaimFair, ClaimStatement(fair)},
      {kPipelinedLeanAckClaim, AckClaimStatement(unkeyed)},
      {kPipelinedLeanAckClaimFair, AckClaimStatement(fair)},
      {kPipelinedFinish, FinishStatement()},
      {kPipelinedFinishClaim, FinishClaimStatement(unkeyed)},
      {kPipelinedFinishClaimFair, FinishClaimStatement(fair)},
      // Their forms with a key bound (ordered, key concurrency), after
      // kPlanGuardKeyed.
      {kPipelinedClaimKeyed, ClaimStatement(keyed)},
      {kPipelinedLeanAckClaimKeyed, AckClaimStatement(keyed)},
      {kPipelinedFinishClaimKeyed, FinishClaimStatement(keyed)},
      // The claiming statements' byte-bounded forms (ClaimRequest::max_bytes).
      {BoundedName(kPipelinedClaim), ClaimStatement(unkeyed_bytes)},
      {BoundedName(kPipelinedClaimFair), ClaimStatement(fair_bytes)},
      {BoundedName(kPipelinedLeanAckClaim), AckClaimStatement(unkeyed_bytes)},
      {BoundedName(kPipelinedLeanAckClaimFair), AckClaimStatement(fair_bytes)},
      {BoundedName(kPipelinedFinishClaim), FinishClaimStatement(unkeyed_bytes)},
      {BoundedName(kPipelinedFinishClaimFair), FinishClaimStatement(fair_bytes)},
      {BoundedName(kPipelinedClaimKeyed), ClaimStatement(keyed_bytes)},
      {BoundedName(kPipelinedLeanAckClaimKeyed), AckClaimStatement(keyed_bytes)},
      {BoundedName(kPipelinedFinishClaimKeyed), FinishClaimStatement(keyed_bytes)},
  };
  // The pipelined ack (pipelined_ack.sql, pipelined_ack_claim.sql) in each
  // form: with or without the claim ahead's read behind its start, key
  // bound, byte bound and the handler's results.
  struct ClaimShape {
    const char* name;
    bool behind, keyed;
  };
  const ClaimShape shapes[] = {{kPipelinedAckClaim, false, false},
                               {kPipelinedAckClaimBehind, true, false},
                               {kPipelinedAckClaimKeyed, false, true},
                               {kPipelinedAckClaimBehindKeyed, true, true}};
  for (const bool results : {false, true}) {
    const auto named = [&](const char* n) { return results ? ResultsName(n) : n; };
    AckForm ack;
    ack.results = results;
    s.push_back({named(kPipelinedAck), PipelinedAck(ack)});
    for (const bool bounded : {false, true}) {
      for (const ClaimShape& shape : shapes) {
        AckForm claim = ack;
        claim.with_claim = true;
        claim.bounded = bounded;
        claim.behind = shape.behind;
        claim.keyed = shape.keyed;
        s.push_back({named(bounded ? BoundedName(shape.name) : shape.name), PipelinedAck(claim)});
      }
    }
  }
  for (auto& st : s) {
    st.second = WithSchema(FillDeletes(st.second, confined, /*guarded=*/true), schema);
  }
  return s;
}

std::string EnqueueSql(absl::string_view schema) {
  return WithSchema(StatementSql("enqueue"), schema);
}
std::string PutItemSql(absl::string_view schema) {
  return WithSchema(StatementSql("put_item"), schema);
}
std::string EnqueueGroupedSql(absl::string_view schema) {
  return WithSchema(StatementSql("enqueue_grouped"), schema);
}

std::vector<Statement> PreparedStatements(absl::string_view schema, bool confined) {
  std::vector<Statement> s;
  // Statements that are a file of pg/sql/ as it is: NAME.sql, whose header
  // says why it looks as it does.
  for (const char* name :
       {// queues
        "create_queue", "get_queue", "list_queues", "set_rate", "grow_parts", "set_fair_by",
        "set_key_concurrency", "set_max_payload", "set_paused",
        // sessions and parts (join, heartbeat and acquire are below)
        "read_group", "release", "leave", "release_claims", "notify", "notify_parts",
        "write_outbox",
        // items
        "enqueue", "dedup_lookup", "lock_items_for_enqueue", "reserve_ids", "reserve_id_list",
        "insert_batch", "put_item", "put_items", "lock_items_for_put", "item_state", "cancel_parts",
        "cancel_items", "vacuum_due", "bloated_indexes", "bloated_table", "leftover_rebuilds",
        "prune", "cancel_by_dedup_key", "item_state_dedup", "current_snapshot", "queue_contents",
        "item_detail", "item_state_api", "item_state_dedup_api", "owns_items", "cancel_items_api",
        "cancel_by_dedup_key_api", "group_cancel_api",
        // dead items
        "dead_requeue", "dead_delete",
        // the Kafka bridge
        "kafka_offset_cas", "kafka_offsets", "count_items", "outbox_read", "outbox_delete",
        // roles per queue (migration 29)
        "grant_queue_right", "revoke_queue_right", "list_grants", "grant_topic", "revoke_topic",
        "forget_earlier_role", "schema_creators",
        // status
        "status_sessions", "status_session_throughput", "next_due", "queues_with_work", "owners",
        "status_horizon", "status_throughput", "status_groups", "status_parts"}) {
    s.push_back({name, StatementSql(name)});
  }
  // The same, sent unprepared (Statement::prepared says when and why):
  // queue groups.
  for (const char* name : {"hold_groups", "insert_batch_grouped", "groups_finished"}) {
    s.push_back({name, StatementSql(name), /*prepared=*/false});
  }
  // Files with holes, filled with fragments that other statements share.
  const std::string heartbeat_me = StatementSql("heartbeat_me");
  s.push_back({"join", Fill("join", {{"{take_over_claims}", TakeOverClaims("kept")}}),
               /*prepared=*/false});
  s.push_back({"heartbeat", Fill("heartbeat", {{"{heartbeat_me}", heartbeat_me}})});
  s.push_back({"heartbeat_idle", Fill("heartbeat_idle", {{"{heartbeat_me}", heartbeat_me}})});
  s.push_back({"acquire", Fill("acquire", {{"{take_over_claims}", TakeOverClaims("ins")}}),
               /*prepared=*/false});
  s.push_back({"fence", Fill("fence", {{"{fence}", FenceCte()}})});
  // A viewer's list names no payload (MayRead).
  s.push_back({"dead_list", Fill("dead_list", {{"{payload}", Fragment("dead_payload")}})});
  s.push_back(
      {"dead_list_hidden", Fill("dead_list", {{"{payload}", Fragment("dead_payload_hidden")}})});
  s.push_back({"ack", Fill("ack", {{"{ack_ctes}", AckCtes()}})});
  // The general Finish and every claiming statement run in
  // PipelinedStatements' forms.
  for (Statement& st : s)
    st.sql = WithSchema(FillDeletes(st.sql, confined, /*guarded=*/false), schema);
  return s;
}

}  // namespace pg_internal
}  // namespace partq
