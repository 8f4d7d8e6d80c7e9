"""The toolkit's claims and their evidence, one module or folder per theory topic.

Each topic is named after the module of :mod:`attneb.theory` that derives it (``attention``,
``depth_ode``, ``energy``, ``mean_field``, ``depth_noise``, ``stage2``, ``tweedie``, ``gaussian``,
``stability``, ``anisotropic``) or, where the topic has no derivation, after the module of
:mod:`attneb.numerics` it verifies (``training``, ``schedules``). A topic registers its claims (statement
and assumptions), the derivations that bear on them, its checks with their criteria, designs and
wrong theories, and its figure. :mod:`.designs` holds what the risk experiments of several topics
share (noise level, bandwidth schedules, reference priors). ``attneb show ID`` prints everything
about one claim with the file and line of each piece.

The engine loads these modules by name (:data:`attneb.proofs_check.engine.content.DEFAULT_CONTENT`).
"""
