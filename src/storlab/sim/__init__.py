"""storlab.sim"""
