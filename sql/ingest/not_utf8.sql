-- The files among $files that are not valid UTF-8 (read_text refuses them; they are read in Python).
SELECT filename FROM read_blob($files::VARCHAR[]) WHERE try(decode(content)) IS NULL;
