-- Does `clean` hold every line of every file, each file's lines contiguous at the expected place?
-- `file_lines` (file, first_row, lines) counts the newlines Python saw in each file. DuckDB's
-- reader skips blank lines, which would shift the line numbers: any difference sends the hour to
-- the full parse. Returns the number of files that do not match (0: the fast path may go on).
SELECT count(*)
FROM (SELECT filename, count(*) AS n, min(rowid) AS first, max(rowid) AS last FROM clean GROUP BY filename) c
FULL OUTER JOIN (SELECT * FROM file_lines WHERE lines > 0) o ON o.file = c.filename
WHERE c.n IS DISTINCT FROM o.lines OR c.first IS DISTINCT FROM o.first_row
   OR c.last IS DISTINCT FROM o.first_row + o.lines - 1;
