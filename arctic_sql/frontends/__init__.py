"""The front ends: the ``arctic-sql`` shell (``cli``, with ``script_check`` and ``shell_history``),
the demo, the Jupyter magics and the optimizer service's command. Each reaches tables through
:class:`arctic_sql.session.Session`; nothing in the core imports them."""
