"""Readers of document formats that are not plain text: PDF, Word, HTML, notebooks, and text in any encoding.

Each turns a file's bytes into the text the chunkers take (markdown where the format has structure: headings,
tables, code), touching no database; ``ingest/loaders.py`` picks the reader by file type.
"""
