"""Koordinator's Reservation as pure decisions: the object and the status Koordinator writes
on it (``model``), the room reservations hold on a node and which one an owner pod goes into
(``holding``), and the reserve pod that lets the stock kube-scheduler place a Reservation
(``reservepod``). Mirrors Koordinator v1.8's pkg/util/reservation and
pkg/scheduler/plugins/reservation.
"""
